package envelope

// TruncateHead is Truncate for output that was never held whole: head is the
// first bytes of an output of total bytes (a command's stdout, an HTTP body
// read up to a cap). When the output fits in max (total <= max and head is
// all of it) head is returned unchanged; otherwise head is cut on a UTF-8
// rune boundary and ends with the same note as Truncate, counting the bytes
// left out against total. The result is at most max bytes. max <= 0 means
// MaxContentBytesDefault; a total smaller than len(head) counts as
// len(head).
func TruncateHead(head string, total, max int) string {
	if max <= 0 {
		max = MaxContentBytesDefault
	}
	if total < len(head) {
		total = len(head)
	}
	if total <= max {
		return head
	}
	reserve := len(truncNote(total, total))
	if reserve > max {
		if len(shortNote) > max {
			return head[:cutAt(head, max)]
		}
		return head[:cutAt(head, max-len(shortNote))] + shortNote
	}
	n := cutAt(head, max-reserve)
	return head[:n] + truncNote(total-n, total)
}
