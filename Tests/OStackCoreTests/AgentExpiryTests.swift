import Dispatch
import Glibc
@testable import OStackCore
import OStackTestSupport
import SodiumKit
import Testing

/// The running agent's own timer (docs/security.md#lock-2): an idle key is wiped by the serving
/// loop itself — not only when a later request arrives — and the agent then exits.
@Suite struct AgentExpiryTests {
    func allZero(_ secret: SecretBytes) -> Bool { secret.withUnsafeBytes { $0.allSatisfy { $0 == 0 } } }

    @Test func theServingLoopWipesAnIdleKeyAndExits() throws {
        let directory = TemporaryDirectory()
        let client = AgentClient.forTests(in: directory)
        let server = ExpiryBox(try AgentServer(socketPath: client.socketPath))
        let account = AccountID(rawValue: "crm.example.com::u1")!
        let dek = AccountDataKey.generate()
        // Stored before the loop runs (same thread), so the test can hold the agent's own copy.
        let put = try #require(
            AgentMessage.parseRequest(
                AgentMessage.request(.put, account: account.rawValue, secret: dek.bytes, idle: 1, lifetime: 60)))
        let held = put.secret
        #expect(AgentMessage.parseResponse(server.value.handle(put).0)?.0 == .ok)
        let finished = DispatchSemaphore(value: 0)
        DispatchQueue(label: "agent-expiry-under-test").async {
            server.value.run()
            finished.signal()
        }
        #expect(client.isUnlocked(account))  // `has` does not count as use
        #expect(finished.wait(timeout: .now() + 10) == .success)  // idle 1 s: forgotten, then exits
        #expect(allZero(held))
        #expect(client.key(for: account) == nil)
    }
}

private final class ExpiryBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
