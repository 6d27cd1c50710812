import PlatformKit
import SodiumKit

/// Talks to `ostack agent`. Every method works with no agent running: then nothing is unlocked.
public struct AgentClient: Sendable {
    public let socketPath: String
    /// The `ostack` executable that serves as the agent (this process's own binary by default).
    public var executable: String = Daemon.currentExecutable
    /// Whether reading a key counts as use (resets its idle timer). `sync --watch` reads without:
    /// a background loop must not keep an account unlocked.
    public var countsAsUse = true

    public init(layout: FileLayout, namespaces: KeyringNamespaces) {
        socketPath = layout.runtimeDirectory + "/agent-\(namespaces.prefix).sock"
    }

    /// The runtime directory holding the socket (`$XDG_RUNTIME_DIR/ostack`, `/tmp/ostack-<uid>` or
    /// `$OSTACK_HOME/run`).
    public var runtimeDirectory: String { SecureFileSystem.parentDirectory(of: socketPath) }

    /// Whether an agent socket exists (one `stat`; lets `status` skip the agent entirely).
    public var mightBeRunning: Bool { SecureFileSystem.exists(socketPath) }

    /// Connects to the agent, or nil when none runs (docs/security.md#lock-3). The runtime directory
    /// must be this user's private directory (not a link, owned by us, 0700) — `/tmp/ostack-<uid>`
    /// can be made first by another user — and the process listening must run under our uid
    /// (`SO_PEERCRED`), checked before a single byte is sent. Either failing is `unsafe-storage`.
    func connect() throws(OStackError) -> UnixSocket? {
        if case .connected(let socket) = try reach() { return socket }
        return nil
    }

    /// What is at the agent's socket.
    enum Reach {
        case none
        case connected(UnixSocket)
        /// An agent listens but accepts nothing (stopped with SIGSTOP, hung): its backlog is full.
        case unresponsive
    }

    /// `connect`, telling no agent from one that accepts nothing: a plain `connect` to a stopped
    /// agent whose backlog had filled waited forever (an `unlock` hung for as long as it stayed
    /// stopped).
    func reach() throws(OStackError) -> Reach {
        guard SecureFileSystem.exists(runtimeDirectory) else { return .none }
        do {
            try SecureFileSystem.checkPrivateDirectory(runtimeDirectory)
        } catch {
            throw OStackError.unsafe(error, role: "the agent's runtime directory")
        }
        guard mightBeRunning else { return .none }
        var attempt: Result<UnixSocket, PlatformError>
        repeat {  // a signal cuts a timed wait short (EINTR): waited again
            attempt = Result { () throws(PlatformError) in
                try UnixSocket.connect(path: socketPath, timeout: Self.connectTimeout)
            }
        } while (try? attempt.get()) == nil && Self.failureCode(attempt) == EINTR
        guard case .success(let socket) = attempt else {
            // Only "nothing listens there" is no agent; anything else (the backlog full, EAGAIN)
            // is an agent that does not accept.
            return Self.meansNoListener(Self.failureCode(attempt)) ? .none : .unresponsive
        }
        guard let peer = socket.peerUID, peer == getuid() else {
            throw OStackError(
                .unsafeStorage, context: .init(object: "the agent socket"),
                detail: "agent socket served by uid \(socket.peerUID.map(String.init) ?? "?"), not \(getuid())")
        }
        return .connected(socket)
    }

    static func failureCode(_ result: Result<UnixSocket, PlatformError>) -> Int32 {
        if case .failure(let error) = result { return error.errno }
        return 0
    }

    /// A connect error that says nothing listens at the path.
    static func meansNoListener(_ code: Int32) -> Bool { code == ECONNREFUSED || code == ENOENT }

    /// Checks the runtime directory and, when a socket exists, who serves it — before a command
    /// consumes a PIN attempt or hands over a key.
    public func verify() throws(OStackError) {
        try checkSocketPath()
        // An agent that accepts nothing cannot take the key: said before a PIN is asked or tried.
        if case .unresponsive = try reach() { throw Self.unresponsiveError }
    }

    /// Why no agent could listen at the socket path, if none could.
    enum SocketPathProblem {
        /// Longer than a Unix socket address holds (107 bytes).
        case tooLong
        /// Something that is not a socket is there (a directory, a file): not ours to remove.
        case notASocket
    }

    /// One `lstat` (and the path's length); nil when the path can hold the agent's socket.
    var socketPathProblem: SocketPathProblem? {
        guard socketPath.utf8.count < Self.socketPathCapacity else { return .tooLong }
        var info = stat()
        if lstat(socketPath, &info) == 0, info.st_mode & S_IFMT != S_IFSOCK { return .notASocket }
        return nil
    }

    /// The socket path must fit a Unix socket address and hold a socket or nothing: an agent could
    /// not listen there otherwise. Checked before a PIN is asked for or tried.
    func checkSocketPath() throws(OStackError) {
        switch socketPathProblem {
        case nil: return
        case .tooLong:
            throw OStackError(
                .invalidInput,
                context: .init(
                    suggestion:
                        "The agent's socket path is longer than a Unix socket allows (\(Self.socketPathCapacity - 1) bytes): use a shorter OSTACK_HOME (without OSTACK_HOME, a shorter XDG_RUNTIME_DIR)."
                ),
                detail: "agent socket path too long")
        case .notASocket:
            throw OStackError(
                .unsafeStorage,
                context: .init(
                    object: "the agent's socket path",
                    suggestion:
                        "Something that is not the agent's socket is at \(socketPath): remove it, then try again."),
                detail: "agent socket path is not a socket")
        }
    }

    /// `sizeof(sockaddr_un.sun_path)`, its terminating NUL included.
    static var socketPathCapacity: Int { MemoryLayout.size(ofValue: sockaddr_un().sun_path) }

    /// One request, one response; both frames stay in secret memory (see `AgentMessage`). Nil when
    /// no agent answers; throws when the directory or the peer is not safe (nothing is sent then).
    func exchange(_ request: SecretBytes) throws(OStackError) -> (AgentMessage.Status, SecretBytes)? {
        guard let socket = try connect() else { return nil }
        guard (try? socket.send(secret: request)) != nil,
            let frame = try? socket.receiveSecret(limit: 1 << 20, timeout: 5)
        else { return nil }
        return AgentMessage.parseResponse(frame)
    }

    /// `exchange` for callers to whom an unsafe agent is the same as none (nothing unlocked).
    func call(_ request: SecretBytes) -> (AgentMessage.Status, SecretBytes)? {
        (try? exchange(request)) ?? nil
    }

    /// The unlocked key of `account` (counts as use: resets its idle timer), or nil when locked.
    public func key(for account: AccountID) -> AccountDataKey? { key(named: account.rawValue).map(AccountDataKey.init) }

    /// A key held under another name (e.g. `file-keyring`), or nil.
    public func key(named name: String) -> SecretBytes? {
        // No fallback to `get` when a `peek` gets no answer (an agent from an older ostack drops an
        // op it does not know): a watch then sees the account as locked rather than keep it unlocked.
        guard let (status, payload) = call(AgentMessage.request(countsAsUse ? .get : .peek, account: name)),
            status == .ok
        else { return nil }
        return payload
    }

    /// Whether `account` is unlocked, without counting as use.
    public func isUnlocked(_ account: AccountID) -> Bool {
        call(AgentMessage.request(.has, account: account.rawValue))?.0 == .ok
    }

    /// Hands an account's key to the agent, starting it first when needed.
    public func store(
        _ key: AccountDataKey, for account: AccountID, limits: AgentLimits, environment: [String: String]
    ) throws(OStackError) {
        try store(key.bytes, named: account.rawValue, limits: limits, environment: environment)
    }

    /// Hands a key to the agent under a name (an account id, or `file-keyring`).
    public func store(
        _ key: SecretBytes, named name: String, limits: AgentLimits, environment: [String: String]
    ) throws(OStackError) {
        try ensureRunning(environment: environment)
        let request = AgentMessage.request(
            .put, account: name, secret: key, idle: UInt32(limits.idle), lifetime: UInt32(limits.lifetime))
        guard try exchange(request)?.0 == .ok else {
            throw OStackError(.internal, detail: "the agent did not take the key")
        }
    }

    /// Makes the agent forget `account`'s key. Throws when the runtime directory or the agent's
    /// peer is not safe (the key may still be held there); no agent at all holds nothing.
    @discardableResult
    public func forgetChecked(_ account: AccountID) throws(OStackError) -> ForgetOutcome {
        try requestOrStop(AgentMessage.request(.forget, account: account.rawValue)) == .stopped
            ? .agentStopped : .forgotten
    }

    /// How a `lock` ended at the agent.
    public enum ForgetOutcome: Sendable, Equatable {
        /// The agent answered (it holds the key no longer), or none runs (nothing is held).
        case forgotten
        /// The agent did not answer within `answerTimeout` (stopped with SIGSTOP, hung): it was
        /// killed, so every key it held is gone, every account's.
        case agentStopped
    }

    /// How long a lock waits for the agent's answer.
    public static let answerTimeout: Double = 5
    /// How long a connection waits for room in the agent's backlog (there is room at once unless
    /// the agent has stopped accepting).
    static let connectTimeout: Double = 1

    /// How a request that must take effect ended.
    public enum RequestOutcome: Sendable, Equatable { case noAgent, answered, stopped }

    /// A request whose effect must be known (`lock`, `agent stop`): "Locked" was said after an agent
    /// that never answered (stopped with SIGSTOP: it kept the key in its memory until continued).
    /// An agent that does not accept the connection or answer within `answerTimeout` is sent
    /// SIGKILL, which a stopped process cannot ignore — the process `SO_PEERCRED` names, or the one
    /// holding the agent's ownership lock when no connection could be made, checked to run under our
    /// uid — and its socket is watched until nothing listens there.
    func requestOrStop(_ request: SecretBytes) throws(OStackError) -> RequestOutcome {
        let pid: Int32?
        switch try reach() {
        case .none: return .noAgent
        case .connected(let socket):
            if (try? socket.send(secret: request)) != nil,
                let frame = try? socket.receiveSecret(limit: 1 << 20, timeout: Self.answerTimeout),
                AgentMessage.parseResponse(frame) != nil
            {
                return .answered
            }
            pid = socket.peerPID
        case .unresponsive:
            pid = AgentProcess.ownerOfLock(socketPath + ".lock")
        }
        guard let pid, pid > 1, AgentProcess.runsAsUs(pid), kill(pid, SIGKILL) == 0 || errno == ESRCH else {
            throw OStackError(.internal, detail: "the agent did not answer and could not be stopped")
        }
        // Gone when nothing listens on its socket any more (a zombie holds no descriptors): up to
        // two seconds. A connect that times out (EAGAIN) is an agent still there.
        for _ in 0..<200 {
            let attempt = Result { () throws(PlatformError) in try UnixSocket.connect(path: socketPath, timeout: 0.1) }
            if Self.meansNoListener(Self.failureCode(attempt)) { return .stopped }
            usleep(10_000)
        }
        throw OStackError(.internal, detail: "the agent did not answer and did not stop")
    }

    /// Applies shorter limits to the keys the agent already holds (a setting made shorter takes
    /// effect at once, not at the next unlock). No agent: nothing to do.
    public func shorten(to limits: AgentLimits) throws(OStackError) {
        _ = try exchange(
            AgentMessage.request(
                .limit, idle: UInt32(clamping: Int(limits.idle)), lifetime: UInt32(clamping: Int(limits.lifetime))))
    }

    /// `forgetChecked` of every key.
    @discardableResult
    public func forgetAllChecked() throws(OStackError) -> ForgetOutcome {
        try requestOrStop(AgentMessage.request(.forgetAll)) == .stopped ? .agentStopped : .forgotten
    }

    /// `forgetChecked` for callers to whom an unsafe agent is the same as none.
    public func forget(_ account: AccountID) { try? forgetChecked(account) }
    /// Stops the agent: asked, or killed when it does not answer (`requestOrStop`). Nil when none ran.
    public func stop() throws(OStackError) -> RequestOutcome? {
        let outcome = try requestOrStop(AgentMessage.request(.stop))
        return outcome == .noAgent ? nil : outcome
    }

    /// The agent's status JSON, or nil when no agent runs.
    public func status() -> String? {
        guard let (status, payload) = call(AgentMessage.request(.status)), status == .ok else { return nil }
        return payload.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
    }

    /// Whether our own agent answers; throws when the directory or the peer is unsafe.
    func checkedStatus() throws(OStackError) -> Bool {
        try exchange(AgentMessage.request(.status))?.0 == .ok
    }

    /// Starts `ostack agent` in the background unless one answers, without waiting for it (unlock
    /// calls this before the Argon2id derivation so the agent starts in parallel).
    @discardableResult
    public func startIfNeeded(environment: [String: String]) -> Bool {
        if status() != nil { return false }
        do {
            try Daemon.spawn(executable: executable, arguments: ["agent", "--foreground"], environment: environment)
            return true
        } catch {
            return false
        }
    }

    /// Starts the agent unless one answers, and waits (≤ 3 s) until it does.
    public func ensureRunning(environment: [String: String]) throws(OStackError) {
        try checkSocketPath()
        if try checkedStatus() { return }
        // One that accepts nothing cannot be replaced (it holds the socket): said, not waited on.
        if case .unresponsive = try reach() { throw Self.unresponsiveError }
        startIfNeeded(environment: environment)
        for _ in 0..<1500 {
            if try checkedStatus() { return }
            usleepLite(2_000)
        }
        // Something put where the agent's socket belongs while it started: not ours to remove.
        try checkSocketPath()
        if case .unresponsive = try reach() { throw Self.unresponsiveError }
        throw OStackError(.internal, detail: "the agent did not start")
    }
}

import Glibc

extension AgentClient {
    /// An agent that holds the socket but answers nothing: the key cannot be handed over.
    static var unresponsiveError: OStackError {
        OStackError(.agentUnresponsive, detail: "the agent does not answer")
    }
}

/// The agent process, found from outside: for a `lock` that must stop an agent accepting nothing.
enum AgentProcess {
    /// The pid holding the `flock` on `path` (the agent's ownership lock), from `/proc/locks`.
    static func ownerOfLock(_ path: String) -> Int32? {
        var info = stat()
        guard stat(path, &info) == 0, let locks = read("/proc/locks") else { return nil }
        // The file's device as /proc/locks spells it: major and minor in hex (Linux's dev_t split).
        let device = UInt64(info.st_dev)
        let major = ((device >> 8) & 0xFFF) | ((device >> 32) & ~UInt64(0xFFF))
        let minor = (device & 0xFF) | ((device >> 12) & ~UInt64(0xFF))
        // "1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234567 0 EOF": the same device and inode, or none.
        var owners: Set<Int32> = []
        for line in locks.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 6, fields[1] == "FLOCK", fields[3] == "WRITE" else { continue }
            let place = fields[5].split(separator: ":")
            guard place.count == 3, UInt64(place[0], radix: 16) == major, UInt64(place[1], radix: 16) == minor,
                UInt64(place[2]) == UInt64(info.st_ino), let pid = Int32(fields[4])
            else { continue }
            owners.insert(pid)
        }
        return owners.count == 1 ? owners.first : nil
    }

    /// Whether `pid` runs under our real uid (`/proc/<pid>/status`; an agent is not dumpable, so the
    /// owner of its /proc entries says nothing).
    static func runsAsUs(_ pid: Int32) -> Bool {
        guard let status = read("/proc/\(pid)/status"),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Uid:") })
        else { return false }
        let ids = line.split(whereSeparator: { $0 == "\t" || $0 == " " }).dropFirst()
        return ids.first.flatMap { UInt32($0) } == getuid()
    }

    /// A /proc file (its size reads as zero: read to the end), at most 1 MiB.
    static func read(_ path: String) -> String? {
        (try? SecureFileSystem.readFile(path, followLinks: true, limit: 1 << 20))?.map {
            String(decoding: $0, as: UTF8.self)
        }
    }
}

func usleepLite(_ microseconds: UInt32) { usleep(microseconds) }
