package envelope

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"
)

// timeSamples are JSON time values on the edges of what the hand-written
// parser reads, and beyond.
var timeSamples = []string{
	`"2025-06-01T10:00:00Z"`, `"2025-06-01T10:00:00.1Z"`, `"2025-06-01T10:00:00.123456789Z"`,
	`"2025-06-01T10:00:00.000000000Z"`, `"2025-06-01T10:00:00.1234567891Z"`, `"2025-06-01T10:00:00.Z"`,
	`"2025-06-01T10:00:00,5Z"`, `"2024-02-29T00:00:00Z"`, `"2023-02-29T00:00:00Z"`, `"1900-02-29T00:00:00Z"`,
	`"2000-02-29T00:00:00Z"`, `"2025-04-31T00:00:00Z"`, `"2025-13-01T00:00:00Z"`, `"2025-00-01T00:00:00Z"`,
	`"2025-01-00T00:00:00Z"`, `"2025-01-01T24:00:00Z"`, `"2025-01-01T23:60:00Z"`, `"2025-01-01T23:59:60Z"`,
	`"0000-01-01T00:00:00Z"`, `"9999-12-31T23:59:59.999999999Z"`, `"2025-06-01t10:00:00Z"`,
	`"2025-06-01T10:00:00z"`, `"2025-06-01 10:00:00Z"`, `"2025-06-01T10:00:00+05:30"`,
	`"2025-06-01T10:00:00-00:00"`, `"2025-06-01T10:00:00+00:00"`, `"2025-06-01T10:00:00.5-23:59"`,
	`"2025-06-01T10:00:00"`, `"2025-6-01T10:00:00Z"`, `"+025-06-01T10:00:00Z"`, `"2025-06-01T1:00:00Z"`,
	`"\u0032025-06-01T10:00:00Z"`, ` "2025-06-01T10:00:00Z"`, `"2025-06-01T10:00:00Z" `, `null`, `""`, `"Z"`,
	`2025`, `"2025-06-01T10:00:00ZZ"`, `"2025-06-01T10:00:00.1e3Z"`, `"2025-06-01T10:00:00.-1Z"`,
}

// The hand-written time codec writes and reads exactly what the time package
// does: the same bytes, the same instant, the same location, the same errors.
func TestTimeCodecMatchesTimePackage(t *testing.T) {
	t.Parallel()
	zones := []*time.Location{
		time.UTC, time.Local, time.FixedZone("", 0), time.FixedZone("X", 0),
		time.FixedZone("", 5*3600+30*60), time.FixedZone("", -(3*3600 + 30*60)), time.FixedZone("", 30),
		time.FixedZone("", -(25*60 + 21)), time.FixedZone("", 14*3600), time.FixedZone("", -12*3600),
		time.FixedZone("", 23*3600+59*60+59), time.FixedZone("", 24*3600), time.FixedZone("", -24*3600-60),
	}
	r := rand.New(rand.NewPCG(1, 2))
	var times []time.Time
	for range 3000 {
		var year int
		switch r.IntN(10) {
		case 0:
			year = r.IntN(40) - 20 // around year 0
		case 1:
			year = 9980 + r.IntN(40) // around year 9999
		default:
			year = 1900 + r.IntN(300)
		}
		ns := r.IntN(1e9)
		switch r.IntN(4) {
		case 0:
			ns = 0
		case 1:
			ns = ns / 1e6 * 1e6 // trailing zeros
		}
		times = append(times, time.Date(year, time.Month(1+r.IntN(12)), 1+r.IntN(31), r.IntN(24), r.IntN(60), r.IntN(60), ns, zones[r.IntN(len(zones))]))
	}
	times = append(times, time.Time{}, time.Now(), time.Now().UTC(), time.Unix(0, 0))
	for _, tm := range times {
		want, wantErr := tm.MarshalJSON()
		got, err := appendTime([]byte("x"), tm)
		if (err != nil) != (wantErr != nil) || err == nil && !bytes.Equal(got, append([]byte("x"), want...)) {
			t.Fatalf("appendTime(%v) = %s, %v; MarshalJSON gives %s, %v", tm, got, err, want, wantErr)
		}
		if err == nil {
			checkParseTime(t, want)
		}
	}
	for _, s := range timeSamples {
		checkParseTime(t, []byte(s))
	}
}

// checkParseTime compares parseTime with time.Time.UnmarshalJSON on raw.
func checkParseTime(t *testing.T, raw []byte) {
	t.Helper()
	var want time.Time
	wantErr := want.UnmarshalJSON(raw)
	got, err := parseTime(raw)
	// The time package makes a new location for each offset it reads, so
	// locations compare by name and offset.
	gotName, gotOff := got.Zone()
	wantName, wantOff := want.Zone()
	if (err != nil) != (wantErr != nil) || !got.Equal(want) || gotName != wantName || gotOff != wantOff ||
		got.Location().String() != want.Location().String() ||
		bytes.HasSuffix(raw, []byte(`Z"`)) && got != want { // UTC: the very same value
		t.Fatalf("parseTime(%s) = %v, %v; UnmarshalJSON gives %v, %v", raw, got, err, want, wantErr)
	}
}

func FuzzParseTime(f *testing.F) {
	for _, s := range timeSamples {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkParseTime(t, raw)
	})
}
