import Glibc

/// A failed system call in PlatformKit. Carries the operation and `errno`, never file contents.
public struct PlatformError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Operation: String, Sendable {
        case createDirectory, open, write, fsync, rename, chmod, stat, read, lock, remove
        /// A path that is not safe to use: a symbolic link (`ELOOP`), not a directory (`ENOTDIR`),
        /// owned by another user (`EPERM`) or open to others (`EACCES`).
        case verify
    }

    public let operation: Operation
    public let errno: Int32
    /// The path involved. Paths are local and not secret; they are never shown to the user by the
    /// CLI's error mapper, only written to the debug log.
    public let path: String

    public init(_ operation: Operation, errno: Int32, path: String) {
        self.operation = operation
        self.errno = errno
        self.path = path
    }

    public var description: String {
        "\(operation.rawValue) failed (errno \(errno): \(String(cString: strerror(errno)))) at \(path)"
    }

    /// `true` when the call failed because the path exists (`EEXIST`).
    public var isExisting: Bool { errno == EEXIST }

    /// `true` when the path itself is unsafe: a planted symbolic link (`O_NOFOLLOW` or `lstat`), or a
    /// directory that is not this user's private directory.
    public var isUnsafePath: Bool { operation == .verify || errno == ELOOP }

    /// `true` when the failure means "there is nothing at this path".
    public var isNotFound: Bool { errno == ENOENT }
}
