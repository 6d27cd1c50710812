import Glibc
import PlatformKit
import SodiumKit

/// `ostack agent` (docs/storage.md, "The agent"): holds unlocked DEKs in `sodium_malloc` memory for the user's other
/// ostack processes. It answers only peers with its own uid (SO_PEERCRED) on a 0600 socket in a 0700
/// directory, forgets an account after its idle timeout (reset only by real use, `get`) or its
/// maximum lifetime, on `forget`, and exits when nothing is unlocked. The process is not dumpable
/// and has no core limit (`ProcessHardening`, applied at start-up). Keys exist only in secret memory
/// (frames included, see `AgentMessage`); a forgotten key is wiped at once.
public final class AgentServer {
    struct Entry {
        var key: SecretBytes
        var created: Double
        var lastUse: Double
        var idle: Double
        var lifetime: Double
    }

    let socket: UnixSocket
    let path: String
    /// Held for the agent's lifetime: exactly one agent per socket, so only the owner ever binds or
    /// unlinks it (two racing starts cannot steal or delete each other's socket).
    let ownership: FileLock
    var entries: [String: Entry] = [:]
    var hadEntries = false
    let started = AgentServer.now()
    /// An agent nobody uses exits after this long.
    let startupGrace: Double = 10

    public init(socketPath: String) throws(OStackError) {
        path = socketPath
        do {
            // Created 0700, or accepted only when it is ours and private (docs/security.md#lock-3).
            try SecureFileSystem.createPrivateDirectory(SecureFileSystem.parentDirectory(of: socketPath))
        } catch {
            throw OStackError.storage(error, role: "the agent's runtime directory")
        }
        do {
            ownership = try FileLock(path: socketPath + ".lock", timeout: 0)
        } catch {
            throw OStackError(.invalidInput, detail: "another agent is already running")
        }
        do {
            socket = try UnixSocket.listen(path: socketPath)
        } catch {
            throw OStackError(.storageFailure, detail: "agent socket: \(error)")
        }
    }

    static func now() -> Double {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
    }

    /// Serves until stopped or until nothing is unlocked.
    public func run() {
        defer { unlink(path) }
        while true {
            expire()
            if entries.isEmpty && (hadEntries || Self.now() - started > startupGrace) { return }
            // Nobody can reach an agent whose socket was removed (e.g. its home deleted): forget and exit.
            if !SecureFileSystem.exists(path) { return }
            guard let client = socket.accept(timeout: 0.25) else { continue }
            guard client.peerUID == getuid() else { continue }  // another user: drop the connection
            guard let frame = try? client.receiveSecret(limit: 4096, timeout: 2),
                let request = AgentMessage.parseRequest(frame)
            else { continue }
            let (response, stop) = handle(request)
            try? client.send(secret: response)
            if stop { return }
        }
    }

    func expire() {
        let now = Self.now()
        forget { _, entry in now - entry.lastUse >= entry.idle || now - entry.created >= entry.lifetime }
    }

    /// Forgets the matching entries, wiping each key now (not only when its last reference goes).
    func forget(where matches: (String, Entry) -> Bool = { _, _ in true }) {
        for (name, entry) in entries where matches(name, entry) {
            entry.key.wipe()
            entries[name] = nil
        }
    }

    func handle(_ request: AgentMessage.Request) -> (SecretBytes, Bool) {
        // A key past its limits is gone before any request sees it: the loop's own sweep runs only
        // every 0.25 s, and a `get` in between returned an expired key and reset its idle timer.
        expire()
        let now = Self.now()
        switch request.op {
        case .put:
            guard request.secret.count > 0, request.idle > 0, request.lifetime > 0 else {
                return (AgentMessage.response(.refused), false)
            }
            entries[request.account]?.key.wipe()  // replaced
            entries[request.account] = Entry(
                key: request.secret, created: now, lastUse: now, idle: Double(request.idle),
                lifetime: Double(request.lifetime))
            hadEntries = true
            return (AgentMessage.response(.ok), false)
        case .get:
            guard var entry = entries[request.account] else { return (AgentMessage.response(.notFound), false) }
            entry.lastUse = now  // real use resets the idle timer
            entries[request.account] = entry
            return (AgentMessage.response(.ok, entry.key), false)
        case .peek:
            guard let entry = entries[request.account] else { return (AgentMessage.response(.notFound), false) }
            return (AgentMessage.response(.ok, entry.key), false)
        case .limit:
            for (name, var entry) in entries {
                if request.idle > 0 { entry.idle = min(entry.idle, Double(request.idle)) }
                if request.lifetime > 0 { entry.lifetime = min(entry.lifetime, Double(request.lifetime)) }
                entries[name] = entry
            }
            expire()
            return (AgentMessage.response(.ok), false)
        case .has:
            return (AgentMessage.response(entries[request.account] == nil ? .notFound : .ok), false)
        case .forget:
            forget { name, _ in name == request.account }
            return (AgentMessage.response(.ok), false)
        case .forgetAll:
            forget()
            return (AgentMessage.response(.ok), false)
        case .status:
            let accounts = entries.keys.sorted().map { account -> String in
                let entry = entries[account]!
                let idleLeft = Int(entry.idle - (now - entry.lastUse))
                let lifeLeft = Int(entry.lifetime - (now - entry.created))
                return
                    "{\"account\":\"\(account)\",\"idleSecondsLeft\":\(idleLeft),\"lifetimeSecondsLeft\":\(lifeLeft)}"
            }
            let dumpable = ProcessHardening.status().dumpable
            let text =
                "{\"pid\":\(getpid()),\"dumpable\":\(dumpable),\"accounts\":[\(accounts.joined(separator: ","))]}"
            return (AgentMessage.response(.ok, SecretBytes(copying: Array(text.utf8))), false)
        case .stop:
            forget()
            return (AgentMessage.response(.ok), true)
        }
    }
}
