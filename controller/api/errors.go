package api

import "errors"

// ErrConfig marks invalid Options (a bad token entry); the message names the field.
var ErrConfig = errors.New("invalid api config")
