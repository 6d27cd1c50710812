import Dispatch
import Glibc
import OStackCore
import PlatformKit
import Synchronization

/// `--jq EXPR` and `--template TEXT` (docs/output.md, "Filtering"): the command's JSON document is
/// kept in memory instead of printed, then filtered — by the system's `jq` (see
/// docs/decisions/0009-jq.md) or by `Template` — and the result printed, sanitised when stdout is a
/// terminal. Only a command that succeeded is filtered; errors go to stderr as always.
enum OutputFilter {
    private static let captured = Mutex<[UInt8]?>(nil)

    /// Starts keeping stdout when a filter was asked for.
    static func begin(_ global: GlobalOptions) {
        guard global.jq != nil || global.template != nil else { return }
        captured.withLock { $0 = [] }
    }

    /// Called by `Terminal.out`: true when the text was kept instead of printed.
    static func keep(_ text: String) -> Bool {
        captured.withLock { buffer in
            guard buffer != nil else { return false }
            buffer!.append(contentsOf: text.utf8)
            return true
        }
    }

    /// Stops keeping; returns what was kept (nil when no filter was active).
    static func end() -> [UInt8]? {
        captured.withLock { buffer in
            defer { buffer = nil }
            return buffer
        }
    }

    /// Filters `document` and prints the result; throws when the filter fails.
    static func finish(_ document: [UInt8], context: CommandContext) throws(OStackError) {
        var output: String
        if let expression = context.global.jq {
            let jq = "/usr/bin/jq"
            guard access(jq, X_OK) == 0 else {
                throw OStackError(
                    .invalidInput, context: .init(suggestion: "--jq needs jq: install it (`make deps` does)."),
                    detail: "no jq")
            }
            // A leading space keeps an expression that starts with `-` from being read as an option
            // (jq 1.6 has no `--`); jq ignores the space.
            let result = Subprocess.run(jq, ["-r", " " + expression], input: document)
            guard result.status == 0 else {
                let said =
                    String(decoding: result.stderr.prefix(300), as: UTF8.self)
                    .split(separator: "\n").first.map(String.init) ?? ""
                throw OStackError(
                    .invalidInput,
                    context: .init(
                        suggestion: "The --jq expression failed: \(ErrorPresenter.sanitize(said, maxLength: 200))"),
                    detail: "jq exit \(result.status)")
            }
            output = String(decoding: result.stdout, as: UTF8.self)
        } else if let text = context.global.template {
            guard let template = try? Template(text) else {
                throw OStackError(
                    .invalidInput, context: .init(suggestion: "--template is not valid."), detail: "template")
            }
            guard let value = JSONValue.parse(document) else {
                throw OStackError(
                    .invalidInput, context: .init(suggestion: "--template takes one JSON document."),
                    detail: "template input")
            }
            output = template.render(value)
        } else {
            return
        }
        if ProcessEnvironment.isTerminal(STDOUT_FILENO) { output = sanitizeKeepingLines(output) }
        if !output.isEmpty && !output.hasSuffix("\n") && context.global.template == nil { output += "\n" }
        Terminal.write(STDOUT_FILENO, output)
    }

    /// The sanitiser, with line breaks and tabs kept.
    static func sanitizeKeepingLines(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            line.split(separator: "\t", omittingEmptySubsequences: false).map {
                ErrorPresenter.sanitize(String($0), maxLength: Int.max)
            }.joined(separator: "\t")
        }.joined(separator: "\n")
    }
}

/// Runs a program with `input` on its stdin and collects its stdout and stderr (a filter such as
/// jq). The input is written from another thread so that neither side can block the other.
enum Subprocess {
    struct Result {
        var status: Int32
        var stdout: [UInt8]
        var stderr: [UInt8]
    }

    static func run(_ executable: String, _ arguments: [String], input: [UInt8]) -> Result {
        let pipes = (0..<3).compactMap { _ in Spawn.pipe() }
        guard pipes.count == 3 else {
            for pipe in pipes { close(pipe.read); close(pipe.write) }
            return Result(status: -1, stdout: [], stderr: [])
        }
        let (inPipe, outPipe, errPipe) = (pipes[0], pipes[1], pipes[2])
        let started = Spawn.start(
            executable, arguments, environment: ProcessEnvironment.current(),
            descriptors: [STDIN_FILENO: inPipe.read, STDOUT_FILENO: outPipe.write, STDERR_FILENO: errPipe.write])
        close(inPipe.read)
        close(outPipe.write)
        close(errPipe.write)
        guard let pid = started else {
            close(inPipe.write)
            close(outPipe.read)
            close(errPipe.read)
            return Result(status: -1, stdout: [], stderr: [])
        }
        signal(SIGPIPE, SIG_IGN)  // a filter that stops reading early must not kill ostack
        let writer = inPipe.write
        let written = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            input.withUnsafeBytes { raw in
                var offset = 0
                while offset < raw.count {
                    let n = write(writer, raw.baseAddress! + offset, raw.count - offset)
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 { break }
                    offset += n
                }
            }
            close(writer)
            written.signal()
        }
        let errors = Mutex<[UInt8]>([])
        let errorsRead = DispatchSemaphore(value: 0)
        let errorReader = errPipe.read
        DispatchQueue.global().async {
            let bytes = drain(errorReader)
            errors.withLock { $0 = bytes }
            errorsRead.signal()
        }
        let output = drain(outPipe.read)
        written.wait()
        errorsRead.wait()
        close(outPipe.read)
        close(errPipe.read)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let exit = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
        return Result(status: exit, stdout: output, stderr: errors.withLock { $0 })
    }

    private static func drain(_ fd: Int32) -> [UInt8] {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return bytes }
            bytes.append(contentsOf: buffer[0..<n])
        }
    }
}
