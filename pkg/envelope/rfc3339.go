package envelope

import "time"

// Times in a call are written as encoding/json writes a time.Time: RFC 3339
// with up to nine digits of fraction, trailing zeros dropped, and Z for a
// zero offset. The time package's formatter and parser are general; the
// forms the envelope uses are written here by hand, and a time in UTC
// (written with Z, the orchestrator's usual form) is read by hand. Every
// other form is left to the time package. TestTimeCodecMatchesTimePackage
// holds the two together.

// appendTime appends t as a JSON string, exactly as t.MarshalJSON would.
func appendTime(dst []byte, t time.Time) ([]byte, error) {
	_, offset := t.Zone()
	wall := t.UTC()
	if offset != 0 {
		wall = wall.Add(time.Duration(offset) * time.Second)
	}
	year, month, day := wall.Date()
	zone := offset / 60 // minutes: the time package drops the seconds of an offset
	if year < 0 || year > 9999 || zone <= -24*60 || zone >= 24*60 {
		// Not RFC 3339: let the time package say why.
		dst = append(dst, '"')
		dst, err := t.AppendText(dst)
		if err != nil {
			return nil, err
		}
		return append(dst, '"'), nil
	}
	hour, minute, sec := wall.Clock()
	dst = append(dst, '"',
		byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-',
		byte('0'+month/10), byte('0'+month%10), '-',
		byte('0'+day/10), byte('0'+day%10), 'T',
		byte('0'+hour/10), byte('0'+hour%10), ':',
		byte('0'+minute/10), byte('0'+minute%10), ':',
		byte('0'+sec/10), byte('0'+sec%10))
	if ns := wall.Nanosecond(); ns != 0 {
		var frac [10]byte
		frac[0] = '.'
		for i := len(frac) - 1; i > 0; i-- {
			frac[i] = byte('0' + ns%10)
			ns /= 10
		}
		n := len(frac)
		for frac[n-1] == '0' {
			n--
		}
		dst = append(dst, frac[:n]...)
	}
	if offset == 0 {
		return append(dst, 'Z', '"'), nil
	}
	sign := byte('+')
	if zone < 0 {
		sign, zone = '-', -zone
	}
	h, m := zone/60, zone%60
	return append(dst, sign, byte('0'+h/10), byte('0'+h%10), ':', byte('0'+m/10), byte('0'+m%10), '"'), nil
}

// parseTime reads a JSON time value as t.UnmarshalJSON would.
func parseTime(raw []byte) (time.Time, error) {
	if t, ok := parseTimeUTC(raw); ok {
		return t, nil
	}
	var t time.Time
	err := t.UnmarshalJSON(raw)
	return t, err
}

// parseTimeUTC reads "2006-01-02T15:04:05Z", quotes included, with an
// optional fraction of one to nine digits before the Z. It reports false for
// anything else, including dates that do not exist.
func parseTimeUTC(b []byte) (time.Time, bool) {
	const shortest = len(`"2006-01-02T15:04:05Z"`)
	if len(b) < shortest || b[0] != '"' || b[len(b)-1] != '"' || b[len(b)-2] != 'Z' {
		return time.Time{}, false
	}
	s := b[1 : len(b)-2]
	if s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	year := digits(s[0:4])
	month := digits(s[5:7])
	day := digits(s[8:10])
	hour := digits(s[11:13])
	minute := digits(s[14:16])
	sec := digits(s[17:19])
	if year < 0 || month < 1 || month > 12 || day < 1 || day > daysIn(month, year) ||
		hour < 0 || hour > 23 || minute < 0 || minute > 59 || sec < 0 || sec > 59 {
		return time.Time{}, false
	}
	ns := 0
	if frac := s[19:]; len(frac) > 0 {
		if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
			return time.Time{}, false
		}
		if ns = digits(frac[1:]); ns < 0 {
			return time.Time{}, false
		}
		for range 10 - len(frac) {
			ns *= 10
		}
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, ns, time.UTC), true
}

// digits reads b, at most nine decimal digits, or returns -1.
func digits(b []byte) int {
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// daysIn is the number of days in month of year (proleptic Gregorian).
func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
