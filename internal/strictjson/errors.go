package strictjson

import "errors"

// ErrTrailing is returned for data with more than white space after its
// JSON value.
var ErrTrailing = errors.New("strictjson: data after the JSON value")

// ErrPanic is returned when the decoder panicked on data.
var ErrPanic = errors.New("strictjson: decoder panicked")
