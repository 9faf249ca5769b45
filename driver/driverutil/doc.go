// Package driverutil holds what the Rheo drivers share and a program
// using Rheo does not need: the SQL functions' defaults and how Go zero
// values stand for them (WithDefaults), the limits of Rheo's arguments
// and their checks (CheckTime, CheckJSON, CheckLength, …), and the
// conversions of Go values to the SQL functions' arguments (Millis,
// Micros, Int32). For the drivers that run Rheo's rules in Go rather than
// in SQL functions (SQLite, Redis) it also holds those rules once: an
// event's fields (PayloadKey, CheckLineage, NewEventID, ParseLeaseID),
// JSON values compared as jsonb compares them (JSONEqual, JSONContains)
// and the cursors of rheo.query_page (QueryFingerprint,
// EncodeQueryCursor, DecodeQueryCursor). It is for writers of drivers and of wrappers around
// one (rheootel); every driver uses it so that the defaults and the
// checks are the same on all of them.
package driverutil
