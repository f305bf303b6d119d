package kjob

// SetApplyAfterRead sets the function Apply runs between its read of the
// schedules topic and its first request.
func SetApplyAfterRead(s *Schedules, f func()) { s.afterRead = f }
