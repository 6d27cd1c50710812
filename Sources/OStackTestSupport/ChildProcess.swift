internal import CPlatform
import Glibc
import PlatformKit
import Synchronization

/// A child process for end-to-end tests, started with `posix_spawn` (not `Foundation.Process`,
/// whose children inherit a blocked SIGTERM — swift-corelibs-foundation#4772). stdout and stderr
/// are captured through pipes drained by background threads, so a chatty child never blocks.
/// `kill()` sends SIGKILL and reaps the child; `deinit` does the same.
public final class ChildProcess: @unchecked Sendable {
    // @unchecked Sendable: mutable state lives behind `state`; pid is immutable.
    public struct SpawnError: Error, CustomStringConvertible {
        public let errno: Int32
        public var description: String { "posix_spawn failed (errno \(errno))" }
    }

    public let pid: Int32
    private let box = StateBox()
    private var readers: [pthread_t] = []

    private final class StateBox: Sendable {
        let state = Mutex(State())
    }

    private struct State {
        var stdout: [UInt8] = []
        var stdoutConsumed = 0
        var stderr: [UInt8] = []
        var stdoutClosed = false
        var stderrClosed = false
        var exitStatus: Int32?
        var peakRSSKilobytes: Int?
    }

    /// Starts `executable` (an absolute path) with `arguments`. `environment` replaces the
    /// environment when given. stdin is /dev/null unless `stdin` bytes are given.
    public init(
        executable: String, arguments: [String], environment: [String: String]? = nil,
        workingDirectory: String? = nil, stdin: [UInt8]? = nil, fd3: [UInt8]? = nil
    ) throws {
        var outPipe: [Int32] = [0, 0]
        var errPipe: [Int32] = [0, 0]
        var inPipe: [Int32] = [0, 0]
        guard cplatform_pipe_cloexec(&outPipe) == 0, cplatform_pipe_cloexec(&errPipe) == 0,
            cplatform_pipe_cloexec(&inPipe) == 0
        else {
            throw SpawnError(errno: errno)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, inPipe[0], 0)
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
        // Optional extra input on file descriptor 3 (e.g. a passphrase for OSTACK_KEYRING_PASSPHRASE_FD=3).
        var extraPipe: [Int32] = [-1, -1]
        if let fd3 {
            guard cplatform_pipe_cloexec(&extraPipe) == 0 else { throw SpawnError(errno: errno) }
            posix_spawn_file_actions_adddup2(&actions, extraPipe[0], 3)
            var offset = 0
            while offset < fd3.count {  // small payloads fit the pipe buffer
                let n = fd3.withUnsafeBytes { write(extraPipe[1], $0.baseAddress! + offset, $0.count - offset) }
                if n <= 0 { break }
                offset += n
            }
            close(extraPipe[1])
        }
        defer { if extraPipe[0] >= 0 { close(extraPipe[0]) } }
        if let workingDirectory { cplatform_spawn_addchdir(&actions, workingDirectory) }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // Children start with default signal dispositions and an empty signal mask.
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        // Its own process group, so kill() also ends grandchildren that hold our pipes.
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let envStrings = (environment ?? Self.currentEnvironment()).map { "\($0.key)=\($0.value)" }
        let envp = envStrings.map { strdup($0) } + [nil]
        defer { envp.forEach { free($0) } }

        var child: pid_t = 0
        let rc = posix_spawn(&child, executable, &actions, &attributes, argv, envp)
        close(outPipe[1])
        close(errPipe[1])
        close(inPipe[0])
        guard rc == 0 else {
            close(outPipe[0])
            close(errPipe[0])
            close(inPipe[1])
            throw SpawnError(errno: rc)
        }
        pid = child
        if let stdin, !stdin.isEmpty {
            var offset = 0
            while offset < stdin.count {
                let n = stdin.withUnsafeBytes { write(inPipe[1], $0.baseAddress! + offset, $0.count - offset) }
                if n <= 0 { break }
                offset += n
            }
        }
        close(inPipe[1])
        readers = [startReader(fd: outPipe[0], isStdout: true), startReader(fd: errPipe[0], isStdout: false)]
    }

    deinit {
        kill()
        for reader in readers { pthread_join(reader, nil) }
    }

    /// The next complete line of stdout (without the newline); nil at EOF; throws on timeout.
    public func readLine(timeout: Double) throws -> String? {
        let deadline = Self.now() + timeout
        while true {
            let result: String?? = box.state.withLock { state in
                let pending = state.stdout[state.stdoutConsumed...]
                if let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: state.stdout[state.stdoutConsumed..<newline], as: UTF8.self)
                    state.stdoutConsumed = newline + 1
                    return .some(line)
                }
                if state.stdoutClosed {
                    if pending.isEmpty { return .some(nil) }
                    state.stdoutConsumed = state.stdout.count
                    return .some(String(decoding: pending, as: UTF8.self))
                }
                return nil
            }
            if let result { return result }
            if Self.now() > deadline { throw TimeoutError(stderr: stderrText()) }
            usleep(2_000)
        }
    }

    public struct TimeoutError: Error, CustomStringConvertible {
        /// What the child had written to stderr by then (a hint at where it waited).
        public var stderr: String
        public init(stderr: String = "") { self.stderr = stderr }
        public var description: String {
            "timed out waiting for the child process" + (stderr.isEmpty ? "" : "; its stderr so far: \(stderr)")
        }
    }

    /// Sends SIGKILL to the child's process group and reaps the child. Safe to call more than once.
    public func kill() {
        Glibc.kill(-pid, SIGKILL)
        let alreadyReaped = box.state.withLock { $0.exitStatus != nil }
        if alreadyReaped { return }
        Glibc.kill(pid, SIGKILL)
        _ = reap(blocking: true)
    }

    /// Sends a signal without reaping.
    public func signal(_ signal: Int32) {
        Glibc.kill(pid, signal)
    }

    /// Waits for the child to exit and returns its exit code (128 + signal when killed).
    public func waitForExit(timeout: Double) throws -> Int32 {
        let deadline = Self.now() + timeout
        while true {
            if let status = reap(blocking: false) {
                // Let the readers drain what is left in the pipes.
                while !box.state.withLock({ $0.stdoutClosed && $0.stderrClosed }) && Self.now() < deadline + 5 {
                    usleep(1_000)
                }
                return status
            }
            if Self.now() > deadline { throw TimeoutError(stderr: stderrText()) }
            usleep(2_000)
        }
    }

    /// The child's own peak resident set size in bytes (its `wait4` rusage), once it has exited.
    public var peakRSS: Int? { box.state.withLock { $0.peakRSSKilobytes.map { $0 * 1024 } } }

    /// Everything on stdout not yet returned by `readLine`.
    public func remainingStdout() -> String {
        box.state.withLock { String(decoding: $0.stdout[$0.stdoutConsumed...], as: UTF8.self) }
    }

    /// Everything the child wrote to stderr so far.
    public func stderrText() -> String {
        box.state.withLock { String(decoding: $0.stderr, as: UTF8.self) }
    }

    // MARK: Internals

    private func reap(blocking: Bool) -> Int32? {
        if let status = box.state.withLock({ $0.exitStatus }) { return status }
        var raw: Int32 = 0
        var usage = rusage()
        let rc = wait4(pid, &raw, blocking ? 0 : WNOHANG, &usage)
        guard rc == pid else { return nil }
        let low = raw & 0x7f
        let status = low == 0 ? (raw >> 8) & 0xff : 128 + low
        box.state.withLock {
            $0.exitStatus = status
            $0.peakRSSKilobytes = usage.ru_maxrss
        }
        return status
    }

    private final class ReaderContext {
        let fd: Int32
        let isStdout: Bool
        weak var owner: ChildProcess?
        let sink: (Bool, [UInt8]?) -> Void
        init(fd: Int32, isStdout: Bool, sink: @escaping (Bool, [UInt8]?) -> Void) {
            self.fd = fd
            self.isStdout = isStdout
            self.sink = sink
        }
    }

    private func startReader(fd: Int32, isStdout: Bool) -> pthread_t {
        let box = self.box
        let context = ReaderContext(fd: fd, isStdout: isStdout) { isStdout, chunk in
            box.state.withLock { state in
                if let chunk {
                    if isStdout { state.stdout += chunk } else { state.stderr += chunk }
                } else if isStdout {
                    state.stdoutClosed = true
                } else {
                    state.stderrClosed = true
                }
            }
        }
        var thread = pthread_t()
        let opaque = Unmanaged.passRetained(context).toOpaque()
        pthread_create(
            &thread, nil,
            { raw in
                let context = Unmanaged<ReaderContext>.fromOpaque(raw!).takeRetainedValue()
                var buffer = [UInt8](repeating: 0, count: 65536)
                while true {
                    let n = buffer.withUnsafeMutableBytes { read(context.fd, $0.baseAddress, $0.count) }
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 { break }
                    context.sink(context.isStdout, Array(buffer[0..<n]))
                }
                close(context.fd)
                context.sink(context.isStdout, nil)
                return nil
            }, opaque)
        return thread
    }

    public static func now() -> Double {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
    }

    public static func currentEnvironment() -> [String: String] {
        ProcessEnvironment.current()
    }
}

/// The result of a short command.
public struct ProcessResult: Sendable {
    public var status: Int32
    public var stdout: String
    public var stderr: String
}

/// Runs a command to completion (killing it after `timeout` seconds) and returns its output.
public func runProcess(
    executable: String, arguments: [String], environment: [String: String]? = nil, stdin: [UInt8]? = nil,
    timeout: Double = 120
) throws -> ProcessResult {
    let child = try ChildProcess(executable: executable, arguments: arguments, environment: environment, stdin: stdin)
    let status: Int32
    do {
        status = try child.waitForExit(timeout: timeout)
    } catch {
        child.kill()
        throw error
    }
    return ProcessResult(status: status, stdout: child.remainingStdout(), stderr: child.stderrText())
}

/// Runs the stock `secret-tool` (a test's independent view of the keyring). Unlike ostack it has
/// no answer to kwalletd5's faulty transfer sessions (docs/keyring.md, "KWallet's transfer
/// sessions"): about one session in 170 fails with "Can't find session …" or "Client public key
/// size is invalid". Each run is a new process and so a new session; a run that failed with one of
/// those two messages is run again, up to three runs in all; if all three fail that way it throws,
/// so that a check for an item's absence never passes on a failed run. Any other outcome is
/// returned as is.
public func runSecretTool(
    _ arguments: [String], environment: [String: String]? = nil, stdin: [UInt8]? = nil
) throws -> ProcessResult {
    var result = try runProcess(
        executable: "/usr/bin/secret-tool", arguments: arguments, environment: environment, stdin: stdin)
    for _ in 1..<3 where result.status != 0 && isFaultyTransferSession(result.stderr) {
        result = try runProcess(
            executable: "/usr/bin/secret-tool", arguments: arguments, environment: environment, stdin: stdin)
    }
    if result.status != 0 && isFaultyTransferSession(result.stderr) {
        throw SecretToolFailure(stderr: result.stderr)
    }
    return result
}

/// `secret-tool` met a faulty transfer session on each of its three runs.
public struct SecretToolFailure: Error, CustomStringConvertible {
    public var stderr: String
    public var description: String { "secret-tool failed over three transfer sessions: \(stderr)" }
}

private func isFaultyTransferSession(_ message: String) -> Bool {
    message.contains("Can't find session") || message.contains("Client public key size is invalid")
}
