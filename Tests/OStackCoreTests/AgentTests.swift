import Dispatch
import Glibc
@testable import OStackCore
import OStackTestSupport
import SodiumKit
import Testing

/// The agent protocol keeps keys in secret memory only: frames are `SecretBytes` end to end, and a
/// key the agent forgets is wiped at once.
@Suite struct AgentMessageTests {
    let key = SecretBytes(randomCount: 32)

    func allZero(_ secret: SecretBytes) -> Bool { secret.withUnsafeBytes { $0.allSatisfy { $0 == 0 } } }

    @Test func aPutRequestRoundTripsInSecretMemory() throws {
        let frame: SecretBytes = AgentMessage.request(
            .put, account: "crm::u1", secret: key, idle: 900, lifetime: 43_200)
        #expect(frame.count == 1 + 2 + 7 + 4 + 32 + 4 + 4)
        let request = try #require(AgentMessage.parseRequest(frame))
        #expect(request.op == .put && request.account == "crm::u1")
        #expect(request.idle == 900 && request.lifetime == 43_200)
        let secret: SecretBytes = request.secret
        #expect(secret == key)
        #expect(secret !== key)  // its own secret memory, not an alias of the caller's key
    }

    @Test func aRequestWithoutSecretHasAnEmptyOne() throws {
        let request = try #require(AgentMessage.parseRequest(AgentMessage.request(.get, account: "a")))
        #expect(request.op == .get && request.account == "a" && request.secret.count == 0)
    }

    @Test func aResponseRoundTripsInSecretMemory() throws {
        let (status, payload) = try #require(AgentMessage.parseResponse(AgentMessage.response(.ok, key)))
        #expect(status == .ok && payload == key)
        let (refused, empty) = try #require(AgentMessage.parseResponse(AgentMessage.response(.refused)))
        #expect(refused == .refused && empty.count == 0)
    }

    @Test func malformedFramesAreRefused() {
        let frame = AgentMessage.request(.put, account: "a", secret: key, idle: 1, lifetime: 1)
        let truncated = SecretBytes(count: frame.count - 1) { out in
            frame.withUnsafeBytes { out.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0.dropLast())) }
        }
        #expect(AgentMessage.parseRequest(truncated) == nil)
        #expect(AgentMessage.parseRequest(SecretBytes(copying: [0x7F, 0, 0])) == nil)  // unknown op
        let response = AgentMessage.response(.ok, key)
        let longer = SecretBytes(count: response.count + 1) { out in
            response.withUnsafeBytes { out.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        }
        #expect(AgentMessage.parseResponse(longer) == nil)
        #expect(AgentMessage.parseResponse(SecretBytes(copying: [0, 0, 0])) == nil)
    }

    @Test func thePublicAPITakesAndReturnsRoleTypes() {
        let get: (AgentClient) -> (AccountID) -> AccountDataKey? = AgentClient.key(for:)
        let store:
            (AgentClient) -> (AccountDataKey, AccountID, AgentLimits, [String: String]) throws(OStackError) -> Void =
                AgentClient.store(_:for:limits:environment:)
        _ = (get, store)
    }

    @Test func aForgottenKeyIsWipedEvenWhileReferenced() throws {
        let directory = TemporaryDirectory()
        let server = try AgentServer(socketPath: directory.appending("agent.sock"))
        let put = try #require(
            AgentMessage.parseRequest(AgentMessage.request(.put, account: "a", secret: key, idle: 60, lifetime: 60)))
        let held = put.secret  // the agent's copy
        #expect(AgentMessage.parseResponse(server.handle(put).0)?.0 == .ok)
        let get = try #require(AgentMessage.parseRequest(AgentMessage.request(.get, account: "a")))
        let (status, payload) = try #require(AgentMessage.parseResponse(server.handle(get).0))
        #expect(status == .ok && payload == key)
        let forget = try #require(AgentMessage.parseRequest(AgentMessage.request(.forget, account: "a")))
        _ = server.handle(forget)
        #expect(server.entries.isEmpty)
        #expect(allZero(held))
        #expect(AgentMessage.parseResponse(server.handle(get).0)?.0 == .notFound)
    }

    @Test func anIdleKeyIsWipedWhenItExpires() throws {
        let directory = TemporaryDirectory()
        let server = try AgentServer(socketPath: directory.appending("agent.sock"))
        let put = try #require(
            AgentMessage.parseRequest(AgentMessage.request(.put, account: "a", secret: key, idle: 1, lifetime: 60)))
        let held = put.secret
        _ = server.handle(put)
        server.expire()
        #expect(!allZero(held))
        usleep(1_100_000)
        server.expire()
        #expect(server.entries.isEmpty)
        #expect(allZero(held))
    }

    /// A request never sees a key past its idle timeout, whenever the agent's loop last swept: a
    /// `get` just after the timeout returned the key (and reset its timer).
    @Test func aKeyPastItsIdleTimeoutIsGoneForTheNextRequest() throws {
        let directory = TemporaryDirectory()
        let server = try AgentServer(socketPath: directory.appending("agent.sock"))
        let put = try #require(
            AgentMessage.parseRequest(AgentMessage.request(.put, account: "a", secret: key, idle: 1, lifetime: 60)))
        let get = try #require(AgentMessage.parseRequest(AgentMessage.request(.get, account: "a")))
        _ = server.handle(put)
        usleep(1_100_000)
        #expect(AgentMessage.parseResponse(server.handle(get).0)?.0 == .notFound)
    }

    /// A real agent on a socket in this process: store, read back, forget; the agent then exits.
    @Test func aClientStoresReadsAndForgetsAKeyOverTheSocket() throws {
        let directory = TemporaryDirectory()
        let client = AgentClient.forTests(in: directory)
        let server = UncheckedBox(try AgentServer(socketPath: client.socketPath))
        let finished = DispatchSemaphore(value: 0)
        DispatchQueue(label: "agent-under-test").async {  // its own thread, even when the pool is busy
            server.value.run()
            finished.signal()
        }
        let account = AccountID(rawValue: "crm.example.com::u1")!
        let dek = AccountDataKey.generate()
        try client.store(dek, for: account, limits: AgentLimits(idle: 60, lifetime: 60), environment: [:])
        #expect(client.isUnlocked(account))
        #expect(client.key(for: account) == dek)
        #expect(client.status()?.contains("\"account\":\"crm.example.com::u1\"") == true)
        client.forget(account)
        #expect(client.key(for: account) == nil)
        #expect(finished.wait(timeout: .now() + 30) == .success)  // nothing unlocked: the agent exits
    }
}

/// Hands a non-Sendable value to another thread in a test that waits for it.
private final class UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

extension AgentClient {
    /// A client whose socket lives in `directory`; it never starts a real agent (`/bin/false`).
    static func forTests(in directory: TemporaryDirectory) -> AgentClient {
        let layout = FileLayout(
            configDirectory: directory.appending("config"), dataDirectory: directory.appending("data"),
            stateDirectory: directory.appending("state"), runtimeDirectory: directory.appending("run"))
        var client = AgentClient(layout: layout, namespaces: KeyringNamespaces(prefix: "test"))
        client.executable = "/bin/false"
        return client
    }
}
