import Glibc
import PlatformKit

/// A private (0700) temporary directory, removed with its contents when the value is released.
/// Each test makes its own, so tests never share files and can run in parallel.
public final class TemporaryDirectory: @unchecked Sendable {
    // @unchecked Sendable: `path` is immutable; removal happens once in deinit.
    public let path: String

    public init(prefix: String = "ostack-test") {
        let base = ProcessInfoLite.environment("TMPDIR") ?? "/tmp"
        var template = Array("\(base)/\(prefix).XXXXXX".utf8CString)
        let created = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(created != nil, "mkdtemp failed (errno \(errno))")
        path = String(cString: created!)
        chmod(path, 0o700)
    }

    /// `path + "/" + name`.
    public func appending(_ name: String) -> String { path + "/" + name }

    /// Writes `lines`, each ended by a newline, to `path` (CSV and NDJSON fixtures).
    public static func writeLines(_ lines: [String], to path: String) throws {
        try SecureFileSystem.writeAtomically(Array((lines.joined(separator: "\n") + "\n").utf8), to: path)
    }

    deinit {
        try? SecureFileSystem.removeTree(path)
    }
}

/// Environment access without Foundation (test support stays light).
public enum ProcessInfoLite {
    public static func environment(_ name: String) -> String? {
        guard let value = getenv(name) else { return nil }
        return String(cString: value)
    }
}
