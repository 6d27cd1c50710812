import FoundationEssentials
import Glibc
import KeyringKit
@testable import OStackCore
import OStackTestSupport
import PlatformKit
import SQLCipherKit
import SodiumKit
import Testing

/// The audit trail (docs/audit.md) on a real SQLCipher account database, the anchor in a keyring.
@Suite struct AuditTrailTests {
    let home = TemporaryDirectory()
    let keyring = InMemoryKeyring()
    let key = AccountDataKey(SecureRandom.secret(32))
    var secrets: KeyringSecretStore { KeyringSecretStore(keyring: keyring) }
    let anchorKey = SecretKey(namespace: "test:auth:a", account: "a", kind: .auditAnchor)
    var path: String { home.path + "/data.db" }

    func trail() throws -> AuditTrail {
        let store = try LocalStore(database: try AccountDatabase.open(path: path, key: key))
        return try AuditTrail(store: store, databaseKey: key, anchorKey: anchorKey, secrets: secrets)
    }

    /// An account whose buffered events (`AuditBuffer`) go to `accounts/acct`.
    static func bufferedAccount() throws -> Account {
        let server = try ServerURL(parsing: "crm.example.com")
        return Account(
            id: try AccountID(server: server, userID: "u"), alias: "a", server: server, userID: "u",
            email: "a@example.com", displayName: "A", createdAt: Date(), lastUsedAt: Date(),
            keyringBackend: "secret-service", dataDirectory: "acct", credentialKind: .session,
            sessionState: .signedIn, sessionExpiresAt: nil, sessionRefreshedAt: nil)
    }

    /// Five events, anchored.
    func filled() throws -> AuditTrail {
        let trail = try trail()
        for (index, event) in ["sign-in", "record.create", "sync", "lock", "unlock"].enumerated() {
            try trail.append(event, details: ["n": String(index)])
        }
        trail.anchor()
        return trail
    }

    @Test func anIntactTrailVerifies() throws {
        let trail = try filled()
        #expect(try trail.verify() == .init(intact: true, events: 5))
        #expect(try trail.entries().map(\.event) == ["sign-in", "record.create", "sync", "lock", "unlock"])
        #expect(try trail.entries(event: "sync").count == 1)
        #expect(try trail.entries(limit: 2).map(\.seq) == [4, 5])
    }

    @Test func aChangedByteIsDetectedAtItsSequence() throws {
        let trail = try filled()
        try trail.store.database.execute("UPDATE audit SET event = 'sync!' WHERE seq = 3")
        #expect(try trail.verify() == .init(intact: false, events: 5, firstBadSeq: 3, problem: "mac"))
    }

    @Test func aChangedDetailOrOutcomeIsDetected() throws {
        let trail = try filled()
        try trail.store.database.execute("UPDATE audit SET outcome = 'failed' WHERE seq = 2")
        #expect(try trail.verify().firstBadSeq == 2)
    }

    @Test func aDeletedMiddleEntryIsDetected() throws {
        let trail = try filled()
        try trail.store.database.execute("DELETE FROM audit WHERE seq = 2")
        #expect(try trail.verify() == .init(intact: false, events: 4, firstBadSeq: 2, problem: "gap"))
    }

    @Test func aDeletedTailIsDetectedByTheAnchor() throws {
        let trail = try filled()
        try trail.store.database.execute("DELETE FROM audit WHERE seq >= 4")
        #expect(try trail.verify() == .init(intact: false, events: 3, firstBadSeq: 4, problem: "truncated"))
    }

    @Test func reorderedEntriesAreDetected() throws {
        let trail = try filled()
        try trail.store.database.execute("UPDATE audit SET seq = 100 WHERE seq = 2")
        try trail.store.database.execute("UPDATE audit SET seq = 2 WHERE seq = 3")
        try trail.store.database.execute("UPDATE audit SET seq = 3 WHERE seq = 100")
        #expect(try trail.verify().firstBadSeq == 2)
    }

    @Test func anOlderCopyOfTheFilesIsDetected() throws {
        do {
            let trail = try trail()
            try trail.append("sign-in")
            try trail.append("sync")
            trail.anchor()
            try trail.store.database.checkpoint()
        }
        let copy = home.path + "/copy.db"
        _ = try runProcess(executable: "/bin/cp", arguments: [path, copy])
        do {
            let trail = try trail()
            try trail.append("lock")
            try trail.append("unlock", outcome: "failed")
            trail.anchor()
            try trail.store.database.checkpoint()
        }
        _ = try runProcess(executable: "/bin/cp", arguments: [copy, path])
        _ = try? runProcess(executable: "/bin/rm", arguments: ["-f", path + "-wal", path + "-shm"])
        #expect(try trail().verify() == .init(intact: false, events: 2, firstBadSeq: 3, problem: "truncated"))
        // Even after new events on the old copy, the anchored entry does not match: rolled back.
        let restored = try trail()
        try restored.append("sync")
        try restored.append("sync")
        #expect(try restored.verify() == .init(intact: false, events: 4, firstBadSeq: 4, problem: "rolled-back"))
        // And after the commands that wrote them anchored their heads: the anchor does not move off
        // the chain it names (it was moved to the fork's head, which then verified as intact).
        restored.anchor()
        try restored.append("sync")
        restored.anchor()
        AnchorWrites.settle()
        #expect(try restored.verify() == .init(intact: false, events: 5, firstBadSeq: 4, problem: "rolled-back"))
    }

    @Test func aDatabaseAheadOfItsAnchorStillVerifies() throws {
        let trail = try filled()
        try trail.append("sync")  // a crash before anchoring
        #expect(try trail.verify() == .init(intact: true, events: 6))
    }

    @Test func bufferedEventsJoinTheChainOnceInOrder() throws {
        let layout = FileLayout(environment: ["OSTACK_HOME": home.path], userID: 1)
        let account = try Self.bufferedAccount()
        try SecureFileSystem.createDirectory(layout.dataDirectory)
        try SecureFileSystem.createDirectory(layout.accountsDirectory)
        try SecureFileSystem.createDirectory(layout.accountDirectory("acct"))
        let buffer = AuditBuffer(
            layout: layout, account: account,
            signer: GlobalAuditTrail(layout: layout, secrets: secrets, namespaces: KeyringNamespaces(prefix: "test")))
        buffer.append("unlock", outcome: "failed", details: ["reason": "wrong-pin"])
        buffer.append("pin.lockout", details: ["odd": "a\"b\\c\n\u{1}é"])
        let saved = try SecureFileSystem.readFile(buffer.path) ?? []
        let trail = try trail()
        try trail.append("sign-in")
        try trail.flush(buffer)
        #expect(!SecureFileSystem.exists(buffer.path))
        // A crash after the commit but before the buffer was removed: the same lines again.
        try SecureFileSystem.writeAtomically(saved, to: buffer.path)
        try trail.flush(buffer)
        #expect(try trail.entries().map(\.event) == ["sign-in", "unlock", "pin.lockout"])
        #expect(try trail.entries()[1].outcome == "failed")
        #expect(try trail.entries()[2].details == ["odd": "a\"b\\c\n\u{1}é"])  // the hand-written JSON round-trips
        #expect(try trail.verify().intact)
    }

    /// Buffered events appended while several connections flush the buffer at once (as several
    /// commands of a locked account do): each event joins the chain exactly once. Flushes and appends
    /// take the buffer's lock (an `flock` on its own open file, so threads exclude each other as
    /// processes do); without it a flush could chain lines another had already moved, or remove a
    /// file another had just taken.
    @Test func concurrentFlushesChainEachBufferedEventOnce() throws {
        let layout = FileLayout(environment: ["OSTACK_HOME": home.path], userID: 1)
        let account = try Self.bufferedAccount()
        try layout.createDirectories()
        try SecureFileSystem.createDirectory(layout.accountDirectory("acct"))
        let signer = GlobalAuditTrail(layout: layout, secrets: secrets, namespaces: KeyringNamespaces(prefix: "test"))
        let buffer = AuditBuffer(layout: layout, account: account, signer: signer)
        _ = try trail()  // the database and its schema, before the threads open theirs
        let events = 300
        let flushers = (0..<3).map { _ in Thread.startFlushing(try! self.trail(), buffer, until: events) }
        for index in 0..<events { buffer.append("lock", details: ["n": String(index)]) }
        for flusher in flushers { flusher.join() }
        let trail = try trail()
        try trail.flush(buffer)
        let numbers = try trail.entries().filter { $0.event == "lock" }.compactMap { $0.details["n"] }
        #expect(numbers.count == events, "\(numbers.count) chained")
        #expect(Set(numbers).count == events)
        #expect(try trail.verify().intact)
    }

    /// docs/security.md#aud-6: a line without a valid MAC under the keyring-held buffer key is not
    /// chained; the number of such lines is recorded.
    @Test func forgedBufferedLinesAreNotChainedButCounted() throws {
        let layout = FileLayout(environment: ["OSTACK_HOME": home.path], userID: 1)
        let account = try Self.bufferedAccount()
        try SecureFileSystem.createDirectory(layout.accountDirectory("acct"))
        let buffer = AuditBuffer(
            layout: layout, account: account,
            signer: GlobalAuditTrail(layout: layout, secrets: secrets, namespaces: KeyringNamespaces(prefix: "test")))
        buffer.append("lock")
        let genuine = try #require(try SecureFileSystem.readFile(buffer.path))
        // A copy of the genuine line, one without a MAC and one with a MAC made under another key.
        var forged = genuine + genuine
        let unsigned =
            #"{"id":"9-1","time":"2026-01-01T00:00:00.000Z","event":"pin.remove","outcome":"ok","details":{}}"#
        forged += Array(unsigned.utf8)
        forged += [10]
        let other = AuditBuffer(layout: layout, account: account)
        var line = AuditBuffer.Line(
            id: "9-2", time: "2026-01-01T00:00:00.000Z", event: "logout", outcome: "ok", details: [:])
        line.mac = other.mac(line, key: SecureRandom.secret(32)).map(Hex.encode)
        forged += Array(try JSONEncoder().encode(line)) + [10]
        // A line that is not a buffered event at all is counted too, never dropped unseen.
        forged += Array("not an event".utf8) + [10]
        try SecureFileSystem.writeAtomically(forged, to: buffer.path)
        let trail = try trail()
        try trail.flush(buffer)
        #expect(try trail.entries().map(\.event) == ["lock", "audit.buffer-rejected"])
        #expect(try trail.entries()[1].details == ["count": "4"])
        #expect(try trail.entries()[1].outcome == "failed")
        #expect(!SecureFileSystem.exists(buffer.path))
    }

    /// The global trail: a line whose anchor was never written (a `kill -9` between the two, a
    /// keyring write that failed) is the head the next append extends — numbering a second line the
    /// same made `verify` report a gap for good — and a verify reads the anchor before the lines.
    @Test func aGlobalLineWithoutItsAnchorIsExtendedNotNumberedAgain() throws {
        let layout = FileLayout(environment: ["OSTACK_HOME": home.path], userID: 1)
        try SecureFileSystem.createDirectory(layout.dataDirectory)
        let global = GlobalAuditTrail(layout: layout, secrets: secrets, namespaces: KeyringNamespaces(prefix: "test"))
        global.append("account.remove")
        let item = try #require(global.item())
        #expect(item.account.hasPrefix("global:"))  // this home's own anchor
        // The very first line too: its key was anchored at 0 before it was written.
        let first = try #require(try secrets.read(item)).withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        let atZero = String(first.prefix { $0 != "|" }) + "|0:" + String(repeating: "0", count: 64)
        try secrets.write(SecretBytes(copying: Array(atZero.utf8)), for: item)
        global.append("keyring.migrate")
        #expect(global.entries().map(\.seq) == [1, 2])
        let anchored = try #require(try secrets.read(item))
        global.append("sign-in", outcome: "failed")
        try secrets.write(anchored, for: item)  // the third line's anchor never written
        global.append("account.remove")
        #expect(global.entries().map(\.seq) == [1, 2, 3, 4])
        #expect(try global.verify() == .init(intact: true, events: 4))
        // A line past the anchor that does not chain (written by no one with the key) is no head:
        // the append goes after the anchor, and verify reports the damage.
        try SecureFileSystem.appendLine(
            Array(#"{"seq":5,"time":"t","event":"x","outcome":"ok","details":{},"mac":"00"}"#.utf8), to: global.path)
        global.append("after-damage")
        #expect(try global.verify().intact == false)
    }
}

/// A thread that flushes `buffer` into `trail` again and again until the trail holds `count` events
/// or three seconds have passed.
private final class Thread: @unchecked Sendable {
    private var handle = pthread_t()
    private let body: () -> Void

    private init(_ body: @escaping () -> Void) { self.body = body }

    static func startFlushing(_ trail: AuditTrail, _ buffer: AuditBuffer, until count: Int) -> Thread {
        let thread = Thread {
            let start = Date()
            while Date().timeIntervalSince(start) < 3 {
                try? trail.flush(buffer)
                if ((try? trail.entries())?.count ?? 0) >= count { return }
            }
        }
        let box = Unmanaged.passRetained(thread).toOpaque()
        pthread_create(
            &thread.handle, nil,
            { raw in
                let thread = Unmanaged<Thread>.fromOpaque(raw!).takeRetainedValue()
                thread.body()
                return nil
            }, box)
        return thread
    }

    func join() { pthread_join(handle, nil) }
}

/// The per-home global anchor (`audit-global.id`), from a red-team review.
@Suite struct GlobalAnchorTests {
    let home = TemporaryDirectory()
    let keyring = InMemoryKeyring()
    var secrets: KeyringSecretStore { KeyringSecretStore(keyring: keyring) }
    let namespaces = KeyringNamespaces(prefix: "test")

    /// Before fd3c30c a trail with lines anchored in the keyring whose file was deleted verified as
    /// "truncated". Deleting `audit-global.id` with it now leaves no anchor to compare with: the
    /// deleted trail verifies intact with 0 events.
    @Test func deletingTheTrailAndItsIdFileIsDetected() throws {
        let layout = FileLayout(environment: ["OSTACK_HOME": home.path], userID: 1)
        try layout.createDirectories()
        let global = GlobalAuditTrail(layout: layout, secrets: secrets, namespaces: namespaces)
        global.append("account.remove")
        global.append("account.remove")
        #expect(try global.verify().intact)
        try SecureFileSystem.removeFile(global.path)
        try SecureFileSystem.removeFile(layout.dataDirectory + "/audit-global.id")
        let verdict = try global.verify()
        #expect(!verdict.intact, "two anchored events deleted with the id file verify as \(verdict)")
    }
}
