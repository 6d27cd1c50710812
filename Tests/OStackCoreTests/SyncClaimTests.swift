import FoundationEssentials
@testable import OStackCore
import OStackTestSupport
import SQLCipherKit
import SodiumKit
import Testing

/// A push claims only entries that are unchanged since it selected them (review finding: a change
/// merged in by another process between selection and sending was lost).
@Suite struct SyncClaimTests {
    let home = TemporaryDirectory()

    let key = AccountDataKey(SecureRandom.secret(32))

    /// A connection to the suite's database (each call another one).
    func store() throws -> LocalStore {
        try LocalStore(database: try AccountDatabase.open(path: home.path + "/data.db", key: key))
    }

    /// Both ways a claim finds an entry unchanged: decoding its row again and comparing entries, or
    /// (the pusher's) comparing the row with the one the entry was decoded from.
    @Test(arguments: [false, true]) func anEntryChangedAfterSelectionIsNotClaimed(comparingRows: Bool) throws {
        let store = try store()
        for n in 1...4 {
            try store.enqueue(
                object: "task", recordID: "r\(n)", operation: .create, payload: ["id": .string("r\(n)"), "title": "a"],
                baseVersion: nil, baseSnapshot: nil)
        }
        let read = try store.dueRows()
        let selected = read.map(\.entry)
        let asRead = comparingRows ? Dictionary(uniqueKeysWithValues: read.map { ($0.entry.seq, $0.row) }) : [:]
        #expect(selected.count == 4)
        // Meanwhile another process (its own connection) merges an update into r1's create, discards
        // r2, and renames r3 (its server gave it another id); r4 is left alone.
        let other = try self.store()
        try other.enqueue(
            object: "task", recordID: "r1", operation: .update, payload: ["status": "done"], baseVersion: nil,
            baseSnapshot: nil)
        try other.discard(selected[1])
        try other.transaction { () throws(OStackError) in try other.renameQueuedRecord("task", from: "r3", to: "s3") }
        let untouched = try store.claim(selected, asRead: asRead)
        #expect(untouched.map(\.recordID) == ["r4"] && untouched == [selected[3]])
        #expect(try store.claim(selected, asRead: asRead).isEmpty, "claimed twice")
        // The next round selects the changed entries and sends what the database holds now.
        let claimed = try store.claim(try store.due())
        #expect(claimed.map(\.recordID) == ["r1", "s3"])
        #expect(claimed[0].payload?["status"] == "done" && claimed[0].payload?["title"] == "a")
        // A change that only writes another Unicode form of a text (equal as Swift strings): what is
        // sent is what is stored, byte for byte.
        let composed = "caf\u{E9}"
        let decomposed = "cafe\u{301}"
        try store.enqueue(
            object: "task", recordID: "r5", operation: .create, payload: ["id": "r5", "title": .string(composed)],
            baseVersion: nil, baseSnapshot: nil)
        let read5 = try store.dueRows()
        try other.enqueue(
            object: "task", recordID: "r5", operation: .update, payload: ["title": .string(decomposed)],
            baseVersion: nil, baseSnapshot: nil)
        var sent = try store.claim(read5.map(\.entry), asRead: comparingRows ? [read5[0].entry.seq: read5[0].row] : [:])
        if sent.isEmpty { sent = try store.claim(try store.due()) }
        #expect(sent.count == 1 && sent.first?.payload?["title"]?.stringValue.map { Array($0.utf8) } == Array(decomposed.utf8))
        // Once claimed, a later change is a new entry, never merged into one being sent.
        let id = try store.enqueue(
            object: "task", recordID: "r1", operation: .update, payload: ["title": "c"], baseVersion: nil,
            baseSnapshot: nil)
        #expect(id != claimed[0].id)
    }
}
