import Glibc
import PlatformKit

/// Writes to stdout/stderr without buffering surprises: stdout carries only data, stderr carries
/// `ostack: error:` / `ostack: hint:` lines and progress.
public struct Terminal: Sendable {
    public var useColor: Bool
    public var stdoutIsTerminal: Bool
    public var stdinIsTerminal: Bool

    public init(environment: [String: String], noColorFlag: Bool) {
        stdoutIsTerminal = ProcessEnvironment.isTerminal(STDOUT_FILENO)
        stdinIsTerminal = ProcessEnvironment.isTerminal(STDIN_FILENO)
        let noColorEnv = environment["NO_COLOR"].map { !$0.isEmpty } ?? false
        useColor = stdoutIsTerminal && !noColorFlag && !noColorEnv && environment["TERM"] != "dumb"
    }

    public func out(_ text: String) { Self.write(STDOUT_FILENO, text) }
    public func err(_ text: String) { Self.write(STDERR_FILENO, text) }

    public func bold(_ text: String) -> String { useColor ? "\u{1B}[1m\(text)\u{1B}[0m" : text }
    public func dim(_ text: String) -> String { useColor ? "\u{1B}[2m\(text)\u{1B}[0m" : text }

    static func write(_ fd: Int32, _ text: String) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 {
                if errno == EINTR { continue }
                return
            }
            offset += n
        }
    }
}
