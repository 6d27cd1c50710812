import Glibc
import OStackCore
import SodiumKit

/// Reads secrets (passwords, API keys, PINs) from a no-echo terminal prompt or from stdin — never
/// from arguments (docs/security.md#tok-5). Bytes go straight into `SecretBytes`; the staging buffer is wiped.
enum SecretInput {
    /// Reads one line from stdin (for `--password-stdin` and friends); a trailing newline is dropped.
    static func fromStdin(maxBytes: Int = 4096) throws(OStackError) -> SecretBytes {
        try readLine(fd: STDIN_FILENO, maxBytes: maxBytes)
    }

    /// Prompts on the controlling terminal with echo off. `flag` names the option that reads the
    /// same secret from stdin instead, for the hint when there is no one to ask.
    static func prompt(_ text: String, noInput: Bool, flag: String) throws(OStackError) -> SecretBytes {
        if noInput {
            throw OStackError(.inputRequired, context: .init(suggestion: .text("Pass it on stdin with \(flag).")))
        }
        let fd = open("/dev/tty", O_RDWR | O_CLOEXEC)
        guard fd >= 0 else {
            throw OStackError(
                .inputRequired, context: .init(suggestion: .text("No terminal: pass it on stdin with \(flag).")))
        }
        defer { close(fd) }
        var original = termios()
        let haveTerminal = tcgetattr(fd, &original) == 0
        if haveTerminal {
            // Echo goes off before the prompt is shown: what is typed as soon as it appears is
            // neither echoed nor discarded (TCSAFLUSH drops only what was typed before).
            var silent = original
            silent.c_lflag &= ~tcflag_t(ECHO)
            silent.c_lflag |= tcflag_t(ICANON)
            tcsetattr(fd, TCSAFLUSH, &silent)
        }
        // Ctrl-C at the prompt puts echo back before the process ends (the terminal would stay silent).
        EchoGuard.arm(fd: fd, original: original, active: haveTerminal)
        _ = text.withCString { write(fd, $0, strlen($0)) }
        defer {
            if haveTerminal { tcsetattr(fd, TCSAFLUSH, &original) }
            EchoGuard.disarm()
            _ = "\n".withCString { write(fd, $0, 1) }
        }
        return try readLine(fd: fd, maxBytes: 4096)
    }

    /// Reads a visible line from the terminal (e-mail, server), or nil without a terminal.
    static func promptVisible(_ text: String, noInput: Bool) -> String? {
        if noInput { return nil }
        let fd = open("/dev/tty", O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        _ = text.withCString { write(fd, $0, strlen($0)) }
        guard let secret = try? readLine(fd: fd, maxBytes: 1024) else { return nil }
        return secret.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
    }

    private static func readLine(fd: Int32, maxBytes: Int) throws(OStackError) -> SecretBytes {
        var staging = [UInt8](repeating: 0, count: maxBytes)
        defer { SecretBytes.wipe(&staging) }
        var count = 0
        while count < maxBytes {
            var byte: UInt8 = 0
            let n = read(fd, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 || byte == UInt8(ascii: "\n") { break }
            staging[count] = byte
            count += 1
        }
        if count > 0 && staging[count - 1] == UInt8(ascii: "\r") { count -= 1 }
        guard count > 0 else {
            throw OStackError(.invalidInput, context: .init(suggestion: "The secret was empty."))
        }
        return SecretBytes(copying: staging[0..<count])
    }
}

/// Non-secret input read from stdin (`--data @-`, `--input -`, `records import -`).
enum StandardInput {
    nonisolated(unsafe) private static var cached: Result<[UInt8], OStackError>?

    /// All of stdin, read once per process (a command that looks at `--data @-` twice reads it
    /// once): at most `APIRequest.fileLimit` bytes, as an input file, with an error that says which
    /// limit it met (it was "Could not read stdin." beyond 64 MiB).
    static func readAllOnce() throws(OStackError) -> [UInt8] {
        let result = cached ?? read()
        cached = result
        switch result {
        case .success(let bytes): return bytes
        case .failure(let error): throw error
        }
    }

    private static func read() -> Result<[UInt8], OStackError> {
        let limit = APIRequest.fileLimit
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(STDIN_FILENO, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 {
                return .failure(
                    OStackError(.invalidInput, context: .init(suggestion: "Could not read stdin."), detail: "stdin"))
            }
            if n == 0 { return .success(bytes) }
            bytes.append(contentsOf: buffer[0..<n])
            if bytes.count > limit {
                return .failure(
                    OStackError(
                        .invalidInput,
                        context: .init(suggestion: "stdin holds more than \(limit >> 20) MiB, which ostack reads at most."),
                        detail: "stdin too large"))
            }
        }
    }
}

/// Restores the terminal's echo when Ctrl-C ends a no-echo prompt (then exits 130, as the default
/// action would). Only async-signal-safe calls in the handler; the settings live in static storage.
enum EchoGuard {
    nonisolated(unsafe) private static var terminal: Int32 = -1
    nonisolated(unsafe) private static var settings = termios()
    nonisolated(unsafe) private static var previous: SignalDisposition.Previous = .none

    static func arm(fd: Int32, original: termios, active: Bool) {
        guard active else { return }
        settings = original
        terminal = fd
        // (An ignored SIGINT stays ignored: Ctrl-C then cannot end the prompt, so echo needs no guard.)
        previous = SignalDisposition.replace(SIGINT) { _ in
            if EchoGuard.terminal >= 0 { tcsetattr(EchoGuard.terminal, TCSANOW, &EchoGuard.settings) }
            _ = write(STDERR_FILENO, "\n", 1)
            _exit(130)
        }
    }

    static func disarm() {
        guard terminal >= 0 else { return }
        terminal = -1
        SignalDisposition.restore(SIGINT, previous)
        previous = .none
    }
}
