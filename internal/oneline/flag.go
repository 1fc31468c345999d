package oneline

import (
	"errors"
	"fmt"
	"time"

	"github.com/idemstore/idemstore/contract"
)

// DurationFlag is a duration flag (a flag.Value) of the commands whose bad
// value is said in one line quoting at most a bounded prefix of it
// (contract.Quote): the flag package's own message would repeat all of it.
type DurationFlag struct {
	Name   string         // the flag's name, without its dash
	Target *time.Duration // where a good value goes
	Min    time.Duration  // the smallest value accepted
	Want   string         // what a good value is, e.g. "a positive duration such as 30s or 5m"
	Bad    func(problem string)
}

// String is the default -h prints: the target's value.
func (v DurationFlag) String() string {
	if v.Target == nil {
		return ""
	}
	return v.Target.String()
}

// Set parses s into Target, or tells Bad what is wrong with it.
func (v DurationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil || d < v.Min {
		problem := fmt.Sprintf("invalid -%s %s: want %s", v.Name, contract.Quote(s), v.Want)
		v.Bad(problem)
		return errors.New(problem)
	}
	*v.Target = d
	return nil
}
