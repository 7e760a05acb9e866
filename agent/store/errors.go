package store

import (
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Sentinel errors. Errors returned by this package wrap one of them where
// the cause is known; match with errors.Is.
var (
	// ErrReadOnly: the database file or its directory cannot be written.
	ErrReadOnly = errors.New("store: database is read-only")
	// ErrCorrupt: the file is not a SQLite database or fails its integrity check.
	ErrCorrupt = errors.New("store: database is corrupt")
	// ErrDiskFull: the disk (or the file's size limit) is full.
	ErrDiskFull = errors.New("store: disk full")
	// ErrIO: the operating system reported an I/O error.
	ErrIO = errors.New("store: I/O error")
	// ErrCantOpen: the file cannot be opened (missing directory, permissions).
	ErrCantOpen = errors.New("store: cannot open database")
	// ErrClosed: the store is closed.
	ErrClosed = errors.New("store: closed")
	// ErrSchema: the file has a schema version newer than this build knows.
	ErrSchema = errors.New("store: unsupported schema version")
	// ErrNotFound: no row matched.
	ErrNotFound = errors.New("store: not found")
)

// classify wraps a SQLite error with the sentinel of its cause.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	var s error
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_READONLY:
		s = ErrReadOnly
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		s = ErrCorrupt
	case sqlite3.SQLITE_FULL:
		s = ErrDiskFull
	case sqlite3.SQLITE_IOERR:
		s = ErrIO
	case sqlite3.SQLITE_CANTOPEN:
		s = ErrCantOpen
	default:
		return err
	}
	return fmt.Errorf("%w: %w", s, err)
}

// fatal reports whether err means the store can no longer be trusted.
func fatal(err error) bool {
	return errors.Is(err, ErrReadOnly) || errors.Is(err, ErrCorrupt) || errors.Is(err, ErrDiskFull) ||
		errors.Is(err, ErrIO) || errors.Is(err, ErrCantOpen)
}
