package datastore

import (
	"fmt"
	"io"
	"io/fs"
	"os"
)

// FileSystem is what the store needs of the operating system. OS is the
// real one; tests wrap it to fail a write or an fsync on purpose.
type FileSystem interface {
	// OpenFile is os.OpenFile.
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// Rename is os.Rename.
	Rename(oldpath, newpath string) error
	// Remove is os.Remove.
	Remove(name string) error
	// MkdirAll is os.MkdirAll.
	MkdirAll(path string, perm fs.FileMode) error
	// SyncDir fsyncs the directory so that a create or rename in it is
	// durable.
	SyncDir(dir string) error
}

// File is the part of *os.File the store uses.
type File interface {
	io.ReadWriteCloser
	Sync() error
	Truncate(size int64) error
	Seek(offset int64, whence int) (int64, error)
}

// OS is the operating system's file system.
type OS struct{}

// OpenFile implements FileSystem.
func (OS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	return os.OpenFile(name, flag, perm)
}

// Rename implements FileSystem.
func (OS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

// Remove implements FileSystem.
func (OS) Remove(name string) error { return os.Remove(name) }

// MkdirAll implements FileSystem.
func (OS) MkdirAll(path string, perm fs.FileMode) error { return os.MkdirAll(path, perm) }

// SyncDir implements FileSystem.
func (OS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
