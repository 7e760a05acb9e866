package strictjson

import "errors"

// ErrTrailing is returned for data with more than white space after its
// JSON value.
var ErrTrailing = errors.New("strictjson: data after the JSON value")

// ErrPanic is returned when the decoder panicked on data.
var ErrPanic = errors.New("strictjson: decoder panicked")

// ErrTime is returned for data with a string that the decoder would read
// as a time otherwise than encoding/json does (sameTimes).
var ErrTime = errors.New("strictjson: a time the decoder reads otherwise than encoding/json")
