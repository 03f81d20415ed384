package model

import "unicode/utf8"

// maxReasonBytes caps the Reason of a Problem. Reasons quote what the user
// wrote (a path, a host, a Service or Secret name), and the file source
// has no API server to bound those: a 1 MB path must cost a line, not a
// megabyte, in every log line, Event and `restysync check` report.
const maxReasonBytes = 1024

// clipReason cuts the middle out of a reason longer than maxReasonBytes,
// on UTF-8 boundaries, keeping its start (the field and the value's
// start) and its end (what was left out).
func clipReason(reason string) string {
	if len(reason) <= maxReasonBytes {
		return reason
	}
	const tail = maxReasonBytes / 4
	head := maxReasonBytes - tail
	for head > 0 && !utf8.RuneStart(reason[head]) {
		head--
	}
	from := len(reason) - tail
	for from < len(reason) && !utf8.RuneStart(reason[from]) {
		from++
	}
	return reason[:head] + " … " + reason[from:]
}
