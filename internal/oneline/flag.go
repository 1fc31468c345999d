package oneline

import (
	"errors"
	"fmt"
	"net"
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

// ListenAddress refuses an address that net.Listen("tcp", addr) would refuse
// for its form: not HOST:PORT, or a port that is neither a number from 0 to
// 65535 nor a service name. A command checks it with its other flags, so a
// bad value is a usage error before anything starts, not a failure after its
// upstream, store or model are up. What only the network can say (an
// unknown host, a port in use) is left to the listen. The problem names the
// flag and quotes a bounded prefix of the value.
func ListenAddress(flagName, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		_, err = net.LookupPort("tcp", port)
	}
	if err != nil {
		return fmt.Errorf("invalid -%s %s: want HOST:PORT with a port from 0 to 65535, such as 127.0.0.1:8931", flagName, contract.Quote(addr))
	}
	return nil
}
