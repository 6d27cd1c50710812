import Glibc

/// File-system operations with the modes ostack promises: directories 0700, files 0600,
/// atomic replacement (temp file + fsync + rename + fsync of the directory).
public enum SecureFileSystem {
    public static let directoryMode: mode_t = 0o700
    public static let fileMode: mode_t = 0o600

    /// Creates `path` and any missing parents with mode 0700. Existing directories are left as
    /// they are (their mode is reported by `mode(of:)` and checked by `doctor`). A symbolic link
    /// at `path` itself is refused (`ELOOP`, docs/security.md#fs-2): ostack never follows a link
    /// planted among its own files (existing parents above `path` may be links, e.g. a linked home).
    public static func createDirectory(_ path: String) throws(PlatformError) {
        if isSymbolicLink(path) { throw PlatformError(.verify, errno: ELOOP, path: path) }
        if isDirectory(path) { return }
        let parent = parentDirectory(of: path)
        if parent != path && !parent.isEmpty && !isDirectory(parent) {
            try createDirectory(parent)
        }
        if mkdir(path, directoryMode) != 0 {
            let error = errno
            if error == EEXIST && isDirectory(path) { return }
            throw PlatformError(.createDirectory, errno: error, path: path)
        }
        // mkdir honours the umask; enforce 0700 regardless of the caller's umask.
        if chmod(path, directoryMode) != 0 { throw PlatformError(.chmod, errno: errno, path: path) }
    }

    /// Creates `path` (and missing parents) 0700, or accepts an existing `path` only when it is a
    /// real directory (not a symbolic link) owned by this user with no access for group or others
    /// (docs/security.md#fs-2). Used for the runtime directory of the agent's socket (which may be
    /// `/tmp/ostack-<uid>`, where another user could have made it first) and the state directory.
    public static func createPrivateDirectory(_ path: String) throws(PlatformError) {
        if !exists(path) {
            try createDirectory(path)
        }
        try checkPrivateDirectory(path)
    }

    /// Throws unless `path` is a directory, not a symbolic link, owned by the effective user, with
    /// mode 0700 or stricter: `ELOOP` (a link), `ENOTDIR`, `EPERM` (another owner) or `EACCES` (open
    /// to group or others), all with the operation `.verify`. A missing path throws `ENOENT`.
    public static func checkPrivateDirectory(_ path: String) throws(PlatformError) {
        try checkDirectory(path, refusing: 0o077)
    }

    /// Throws unless `path` is a directory, not a symbolic link, owned by the effective user, that
    /// group and others cannot write to (`ELOOP`, `ENOTDIR`, `EPERM` or `EACCES`, operation `.verify`).
    public static func checkOwnDirectory(_ path: String) throws(PlatformError) {
        try checkDirectory(path, refusing: 0o022)
    }

    /// A real directory of the effective user with none of the `refusing` mode bits.
    private static func checkDirectory(_ path: String, refusing bits: mode_t) throws(PlatformError) {
        var info = stat()
        guard lstat(path, &info) == 0 else { throw PlatformError(.stat, errno: errno, path: path) }
        switch info.st_mode & S_IFMT {
        case S_IFDIR: break
        case S_IFLNK: throw PlatformError(.verify, errno: ELOOP, path: path)
        default: throw PlatformError(.verify, errno: ENOTDIR, path: path)
        }
        guard info.st_uid == geteuid() else { throw PlatformError(.verify, errno: EPERM, path: path) }
        guard info.st_mode & bits == 0 else { throw PlatformError(.verify, errno: EACCES, path: path) }
    }

    /// Throws `ELOOP` (operation `.verify`) when `path` is a symbolic link; a missing path is fine.
    public static func refuseSymbolicLink(_ path: String) throws(PlatformError) {
        if isSymbolicLink(path) { throw PlatformError(.verify, errno: ELOOP, path: path) }
    }

    /// Whether `path` itself is a symbolic link (`lstat`).
    public static func isSymbolicLink(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFLNK
    }

    /// Atomically replaces `path` with `bytes` (mode 0600): write a temp file in the same
    /// directory, fsync it, rename it over the target, fsync the directory. A crash at any point
    /// leaves either the old or the new content, never a mix.
    public static func writeAtomically(_ bytes: [UInt8], to path: String) throws(PlatformError) {
        let directory = parentDirectory(of: path)
        let temp = "\(path).tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, fileMode)
        guard fd >= 0 else { throw PlatformError(.open, errno: errno, path: temp) }
        var succeeded = false
        defer {
            if !succeeded { unlink(temp) }
        }
        do {
            defer { close(fd) }
            if fchmod(fd, fileMode) != 0 { throw PlatformError(.chmod, errno: errno, path: temp) }
            try writeAll(fd, bytes, path: temp)
            if fsync(fd) != 0 { throw PlatformError(.fsync, errno: errno, path: temp) }
        }
        if rename(temp, path) != 0 { throw PlatformError(.rename, errno: errno, path: path) }
        succeeded = true
        syncDirectory(directory)
    }

    /// Appends `bytes` and a newline to `path` (created 0600) in one `write` with `O_APPEND`, so
    /// concurrent appenders never interleave inside a line. No fsync: for best-effort logs. A
    /// symbolic link at `path` is never followed (`O_NOFOLLOW`: the open fails with `ELOOP`).
    public static func appendLine(_ bytes: [UInt8], to path: String) throws(PlatformError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, fileMode)
        guard fd >= 0 else { throw PlatformError(.open, errno: errno, path: path) }
        defer { close(fd) }
        try writeAll(fd, bytes + [UInt8(ascii: "\n")], path: path)
    }

    /// Atomically replaces `path` with the existing file `source`: fsync `source`, rename it over
    /// `path`, fsync the directory. Both must be on the same file system.
    public static func replace(_ path: String, with source: String) throws(PlatformError) {
        let fd = open(source, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw PlatformError(.open, errno: errno, path: source) }
        let synced = fsync(fd) == 0
        close(fd)
        if !synced { throw PlatformError(.fsync, errno: errno, path: source) }
        if rename(source, path) != 0 { throw PlatformError(.rename, errno: errno, path: path) }
        syncDirectory(parentDirectory(of: path))
    }

    /// Reads the whole file, or returns `nil` when it does not exist. Unless `followLinks` (for a
    /// file the user names, e.g. `--data @file`), a symbolic link at `path` is refused (`ELOOP`):
    /// every file under ostack's own directories is opened with `O_NOFOLLOW`.
    /// `limit`: a file (or device, or pipe) longer than this many bytes is refused with `EFBIG`
    /// after `limit + 1` bytes, instead of growing memory until the process dies.
    public static func readFile(_ path: String, followLinks: Bool = false, limit: Int? = nil) throws(PlatformError)
        -> [UInt8]?
    {
        let fd = open(path, O_RDONLY | O_CLOEXEC | (followLinks ? 0 : O_NOFOLLOW))
        if fd < 0 {
            let error = errno
            if error == ENOENT { return nil }
            throw PlatformError(.open, errno: error, path: path)
        }
        defer { close(fd) }
        var result: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw PlatformError(.read, errno: errno, path: path)
            }
            if n == 0 { break }
            result.append(contentsOf: chunk[0..<n])
            if let limit, result.count > limit { throw PlatformError(.read, errno: EFBIG, path: path) }
        }
        return result
    }

    /// Removes a file; a missing file is not an error.
    public static func removeFile(_ path: String) throws(PlatformError) {
        if unlink(path) != 0 && errno != ENOENT { throw PlatformError(.remove, errno: errno, path: path) }
    }

    /// Removes a directory tree (files and sub-directories); a missing path is not an error.
    public static func removeTree(_ path: String) throws(PlatformError) {
        let children: [String]
        do {
            children = try contentsOfDirectory(path)
        } catch {
            if error.errno == ENOENT { return }
            if error.errno == ENOTDIR { try removeFile(path); return }
            throw PlatformError(.remove, errno: error.errno, path: path)
        }
        for child in children {
            let childPath = path + "/" + child
            if isDirectory(childPath, followLinks: false) {
                try removeTree(childPath)
            } else {
                try removeFile(childPath)
            }
        }
        if rmdir(path) != 0 && errno != ENOENT { throw PlatformError(.remove, errno: errno, path: path) }
    }

    /// The names in a directory (without "." and ".."), unsorted.
    public static func contentsOfDirectory(_ path: String) throws(PlatformError) -> [String] {
        guard let dir = opendir(path) else { throw PlatformError(.read, errno: errno, path: path) }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// The permission bits of `path` (e.g. 0o600), or `nil` if it does not exist.
    public static func mode(of path: String) -> mode_t? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return info.st_mode & 0o7777
    }

    /// The size in bytes of the file at `path`, or `nil` if it does not exist.
    public static func size(of path: String) -> Int? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Int(info.st_size)
    }

    /// The path with every symbolic link, `.` and `..` resolved (`realpath`), or `path` itself when
    /// that fails (it does not exist yet, a component cannot be searched).
    public static func canonicalPath(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    public static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    public static func isDirectory(_ path: String, followLinks: Bool = true) -> Bool {
        var info = stat()
        let rc = followLinks ? stat(path, &info) : lstat(path, &info)
        return rc == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }

    /// Creates an empty file with mode 0600 if it does not exist yet (used before SQLCipher opens
    /// a new database, so the file is never briefly world-readable).
    /// Gives the complete file `partial` the name `path`, never over a file that exists there
    /// (EEXIST): a hard link, or where the file system has none, the name taken with `O_EXCL` and
    /// `partial` renamed over that empty placeholder. `partial` keeps its own name as well after a
    /// link; the caller removes it.
    public static func publish(_ partial: String, as path: String) throws(PlatformError) {
        if link(partial, path) == 0 { return }
        let error = errno
        guard [EPERM, EOPNOTSUPP, EMLINK, EXDEV].contains(error) else {
            throw PlatformError(.open, errno: error, path: path)
        }
        let placeholder = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, fileMode)
        guard placeholder >= 0 else { throw PlatformError(.open, errno: errno, path: path) }
        close(placeholder)
        guard rename(partial, path) == 0 else {
            let renameError = errno
            unlink(path)
            throw PlatformError(.rename, errno: renameError, path: path)
        }
    }

    public static func createFileIfMissing(_ path: String) throws(PlatformError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, fileMode)
        guard fd >= 0 else { throw PlatformError(.open, errno: errno, path: path) }
        close(fd)
    }

    public static func parentDirectory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        if slash == path.startIndex { return "/" }
        return String(path[..<slash])
    }

    private static func writeAll(_ fd: Int32, _ bytes: [UInt8], path: String) throws(PlatformError) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { buffer in
                write(fd, buffer.baseAddress! + offset, buffer.count - offset)
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw PlatformError(.write, errno: errno, path: path)
            }
            offset += n
        }
    }

    private static func syncDirectory(_ path: String) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = fsync(fd)
        close(fd)
    }
}
