package benchpath

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// cpuTimes is the CPU time the whole machine spent (Linux /proc/stat): busy
// is user, nice, system, irq and softirq time over all CPUs, what the
// client, the database and everything between them used; steal is what the
// hypervisor gave to other machines. ok is false where /proc/stat cannot
// be read.
type cpuTimes struct {
	busy, steal time.Duration
	// self is the part of busy this process (the client, both sides'
	// code, pgx) used.
	self time.Duration
	ok   bool
}

// userHZ is the unit of /proc/stat: USER_HZ, 100 on every Linux
// architecture Go supports.
const userHZ = 100

// readCPU reads the machine's CPU times now.
func readCPU() cpuTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTimes{}
	}
	var v [8]int64 // user nice system idle iowait irq softirq steal
	for i := range v {
		if v[i], err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
			return cpuTimes{}
		}
	}
	self, ok := selfTicks()
	if !ok {
		return cpuTimes{}
	}
	tick := time.Second / userHZ
	return cpuTimes{
		busy:  time.Duration(v[0]+v[1]+v[2]+v[5]+v[6]) * tick,
		steal: time.Duration(v[7]) * tick,
		self:  time.Duration(self) * tick,
		ok:    true,
	}
}

// selfTicks is this process's user and system time (/proc/self/stat's
// utime and stime, after the command's name, which may hold spaces).
func selfTicks() (int64, bool) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	return u + s, err1 == nil && err2 == nil
}

// since returns the CPU times spent from c to now.
func (c cpuTimes) since() cpuTimes {
	now := readCPU()
	if !c.ok || !now.ok {
		return cpuTimes{}
	}
	return cpuTimes{busy: now.busy - c.busy, steal: now.steal - c.steal, self: now.self - c.self, ok: true}
}

// plus adds the times of two measurements; unknown if either is.
func (c cpuTimes) plus(o cpuTimes) cpuTimes {
	return cpuTimes{busy: c.busy + o.busy, steal: c.steal + o.steal, self: c.self + o.self, ok: c.ok && o.ok}
}
