internal import CPlatform
import Glibc

/// The process environment and identity, read without Foundation.
public enum ProcessEnvironment {
    /// All environment variables of this process.
    public static func current() -> [String: String] {
        var result: [String: String] = [:]
        var pointer = environ
        while let entry = pointer.pointee {
            let text = String(cString: entry)
            if let equals = text.firstIndex(of: "=") {
                result[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            pointer += 1
        }
        return result
    }

    /// The real user id.
    public static var userID: UInt32 { getuid() }

    /// The home directory from the password database (used when `HOME` is unset).
    public static var passwordHomeDirectory: String? {
        guard let entry = getpwuid(getuid()), let dir = entry.pointee.pw_dir else { return nil }
        return String(cString: dir)
    }

    /// Whether the file descriptor is a terminal.
    public static func isTerminal(_ fd: Int32) -> Bool { isatty(fd) == 1 }

    /// The columns and rows of the terminal on `fd`, or nil when it is not a terminal or reports no size.
    public static func terminalSize(_ fd: Int32) -> (columns: Int, rows: Int)? {
        var columns: Int32 = 0
        var rows: Int32 = 0
        guard cplatform_terminal_size(fd, &columns, &rows) == 0 else { return nil }
        return (Int(columns), Int(rows))
    }
}
