import Glibc
import PlatformKit
import Synchronization

/// Writes to stdout/stderr without buffering surprises: stdout carries only data, stderr carries
/// `ostack: error:` / `ostack: hint:` lines and progress.
public struct Terminal: Sendable {
    public var useColor: Bool
    public var stdoutIsTerminal: Bool
    public var stdinIsTerminal: Bool
    public var stderrIsTerminal: Bool
    /// The columns tables fit into: `COLUMNS` when set, else the terminal's width (80 when it
    /// reports none); nil when stdout is not a terminal and `COLUMNS` is not set (nothing is cut).
    public var width: Int?
    /// The terminal's rows, when stdout is one.
    public var height: Int?

    /// `--format`, when given.
    public var format: OutputFormat?

    public init(environment: [String: String], noColorFlag: Bool, format: OutputFormat? = nil) {
        self.format = format
        stdoutIsTerminal = ProcessEnvironment.isTerminal(STDOUT_FILENO)
        stdinIsTerminal = ProcessEnvironment.isTerminal(STDIN_FILENO)
        stderrIsTerminal = ProcessEnvironment.isTerminal(STDERR_FILENO)
        let size = stdoutIsTerminal ? ProcessEnvironment.terminalSize(STDOUT_FILENO) : nil
        height = size?.rows
        if let columns = environment["COLUMNS"].flatMap(Int.init), columns > 0 {
            width = min(columns, 10_000)
        } else if stdoutIsTerminal {
            width = size?.columns ?? 80
        }
        let noColorEnv = environment["NO_COLOR"].map { !$0.isEmpty } ?? false
        useColor = stdoutIsTerminal && !noColorFlag && !noColorEnv && environment["TERM"] != "dumb"
    }

    /// How lists print: `--format`, else an aligned table on a terminal and tab-separated values
    /// for programs.
    public var defaultFormat: OutputFormat { format ?? (stdoutIsTerminal ? .table : .tsv) }

    public func out(_ text: String) {
        Self.stdoutWrites += 1
        if OutputFilter.keep(text) { return }  // `--jq` / `--template` filter it at the end
        Self.write(STDOUT_FILENO, text)
    }

    /// How many times a command has written its stdout (kept or printed): a command is run again
    /// after an unlock on demand only when it has printed nothing.
    nonisolated(unsafe) static var stdoutWrites = 0
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
                if errno == EPIPE && fd == STDOUT_FILENO { readerGone.store(true, ordering: .relaxed) }
                return
            }
            offset += n
        }
    }

    /// Whether stdout's reader has gone (`| head` that stopped reading). SIGPIPE is ignored
    /// (`OStackMain`): what is left of the output is dropped, and a command that would go on
    /// printing for ever (`sync --watch`) stops.
    public static var stdoutReaderGone: Bool { readerGone.load(ordering: .relaxed) }
    private static let readerGone = Atomic<Bool>(false)
}
