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

    func store() throws -> LocalStore {
        let key = AccountDataKey(SecureRandom.secret(32))
        return try LocalStore(database: try AccountDatabase.open(path: home.path + "/data.db", key: key))
    }

    @Test func anEntryChangedAfterSelectionIsNotClaimed() throws {
        let store = try store()
        try store.enqueue(
            object: "task", recordID: "r1", operation: .create, payload: ["id": "r1", "title": "a"], baseVersion: nil,
            baseSnapshot: nil)
        try store.enqueue(
            object: "task", recordID: "r2", operation: .create, payload: ["id": "r2", "title": "b"], baseVersion: nil,
            baseSnapshot: nil)
        let selected = try store.due()
        #expect(selected.count == 2)
        // Meanwhile another process merges an update into r1's create and discards r2.
        try store.enqueue(
            object: "task", recordID: "r1", operation: .update, payload: ["status": "done"], baseVersion: nil,
            baseSnapshot: nil)
        try store.discard(selected[1])
        #expect(try store.claim(selected).isEmpty)
        // The next round selects the merged entry and sends what the database holds now.
        let claimed = try store.claim(try store.due())
        #expect(claimed.count == 1)
        #expect(claimed[0].payload?["status"] == "done" && claimed[0].payload?["title"] == "a")
        // Once claimed, a later change is a new entry, never merged into one being sent.
        let id = try store.enqueue(
            object: "task", recordID: "r1", operation: .update, payload: ["title": "c"], baseVersion: nil,
            baseSnapshot: nil)
        #expect(id != claimed[0].id)
    }
}
