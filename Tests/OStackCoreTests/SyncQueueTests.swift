import FoundationEssentials
@testable import OStackCore
import OStackTestSupport
import PlatformKit
import SQLCipherKit
import SodiumKit
import Synchronization
import Testing

/// A clock the test moves by hand.
private final class ManualClock: Sendable {
    let seconds = Mutex<Double>(1_800_000_000)
    var now: Double { seconds.withLock { $0 } }
    func advance(_ delta: Double) { seconds.withLock { $0 += delta } }
    var clock: Clock { Clock { [self] in Date(timeIntervalSince1970: self.now) } }
}

/// A real SQLCipher account database in a temporary directory.
private struct Fixture {
    let directory = TemporaryDirectory()
    let time = ManualClock()
    let key = AccountDataKey(SecretBytes(randomCount: 32))
    let store: LocalStore

    init() throws {
        let database = try AccountDatabase.open(path: directory.appending("account.db"), key: key)
        store = try LocalStore(database: database, clock: time.clock)
    }
}

@Suite struct SyncQueueTests {
    private let fixture: Fixture
    var store: LocalStore { fixture.store }

    init() throws {
        fixture = try Fixture()
    }

    @discardableResult
    func enqueue(
        _ operation: QueueEntry.Operation, _ recordID: String = "r1", _ payload: [String: JSONValue]? = nil,
        base: String? = nil, snapshot: [String: JSONValue]? = nil, object: String = "task"
    ) throws -> String? {
        try store.enqueue(
            object: object, recordID: recordID, operation: operation, payload: payload, baseVersion: base,
            baseSnapshot: snapshot)
    }

    func only() throws -> QueueEntry {
        let all = try store.entries()
        try #require(all.count == 1, "\(all)")
        return all[0]
    }

    // MARK: The database

    @Test func theDatabaseIsEncryptedAndReopensOnlyWithItsKey() throws {
        let directory = TemporaryDirectory()
        let path = directory.appending("a.db")
        let key = AccountDataKey(SecretBytes(randomCount: 32))
        do {
            let store = try LocalStore(database: try AccountDatabase.open(path: path, key: key))
            try store.putRecord("task", ["id": "t1", "title": "CNRY-PLAINTEXT"], version: "v1")
        }
        let raw =
            try #require(try SecureFileSystem.readFile(path))
            + ((try? SecureFileSystem.readFile(path + "-wal")) ?? nil ?? [])
        #expect(raw.count > 4096)
        #expect(raw.firstRange(of: Array("CNRY-PLAINTEXT".utf8)) == nil)
        #expect(raw.firstRange(of: Array("SQLite format 3".utf8)) == nil)
        let reopened = try LocalStore(database: try AccountDatabase.open(path: path, key: key))
        #expect(try reopened.record("task", "t1")?.data["title"] == "CNRY-PLAINTEXT")
        let error = #expect(throws: OStackError.self) {
            try AccountDatabase.open(path: path, key: AccountDataKey(SecretBytes(randomCount: 32)))
        }
        #expect(error?.code == .storageUnreadable)
    }

    // MARK: Coalescing

    @Test func createThenUpdateIsOneCreateWithTheMergedPayload() throws {
        let first = try enqueue(.create, "r1", ["id": "r1", "title": "a", "amount": 1])
        let second = try enqueue(.update, "r1", ["title": "b", "done": true], base: "v9")
        let entry = try only()
        #expect(first != nil && second == first && entry.id == first)
        #expect(entry.operation == .create)
        #expect(entry.payload == ["id": "r1", "title": "b", "amount": 1, "done": true])
        #expect(entry.baseVersion == nil)
        #expect(entry.status == .pending && entry.attempts == 0 && !entry.sent && entry.revision == 0)
        #expect(entry.idempotencyKey == entry.id)
        #expect(entry.id.hasPrefix("q_") && entry.id.count == 26)
    }

    @Test func queueIdsCountUpInTheOrderTheyWereMadeAndStayUnique() throws {
        // In a queue: each id's count is larger than the one before, whatever the clock says.
        let ids = try (1...5).compactMap { n -> String? in
            fixture.time.advance(n == 3 ? -60 : 0.001)
            return try enqueue(.create, "r\(n)", ["id": .string("r\(n)")])
        }
        #expect(ids.count == 5 && ids == ids.sorted())
        for id in ids {
            #expect(id.count == 26 && id.hasPrefix("q_"))
            #expect(id.dropFirst(2).allSatisfy { RandomID.hexDigits.contains($0) })
        }
        // (Tests running beside this one take counts too: each is larger, not necessarily by one.)
        let counts = ids.compactMap { UInt64($0.dropFirst(2).prefix(13), radix: 16) }
        #expect(counts.count == 5 && zip(counts, counts.dropFirst()).allSatisfy { $1 > $0 })
        // The random part keeps ids apart (and a count from another process may come close).
        let suffixes = Set((0..<1000).map { _ in LocalStore.newEntryID().suffix(11) })
        #expect(suffixes.count == 1000)
    }

    @Test func updateThenUpdateIsOneUpdateKeepingTheFirstBase() throws {
        let snapshot: [String: JSONValue] = ["id": "r1", "title": "a", "amount": 1]
        let first = try enqueue(.update, "r1", ["title": "b"], base: "v1", snapshot: snapshot)
        let second = try enqueue(
            .update, "r1", ["amount": 2, "title": "c"], base: "v2", snapshot: ["id": "r1", "title": "b", "amount": 1])
        let entry = try only()
        #expect(second == first)
        #expect(entry.operation == .update)
        #expect(entry.payload == ["title": "c", "amount": 2])
        #expect(entry.baseVersion == "v1")
        #expect(entry.baseSnapshot == snapshot)
    }

    @Test func createThenDeleteQueuesNothing() throws {
        try enqueue(.create, "r1", ["id": "r1", "title": "a"])
        try enqueue(.update, "r1", ["title": "b"])
        let deleted = try enqueue(.delete, "r1")
        #expect(deleted == nil)
        #expect(try store.entries().isEmpty)
        #expect(try store.counts() == .init(pending: 0, failed: 0, conflict: 0))
    }

    @Test func updateThenDeleteIsOneDelete() throws {
        let first = try enqueue(.update, "r1", ["title": "b"], base: "v1", snapshot: ["id": "r1", "title": "a"])
        let second = try enqueue(.delete, "r1", base: "v2")
        let entry = try only()
        #expect(second == first)
        #expect(entry.operation == .delete)
        #expect(entry.payload == nil)
        #expect(entry.baseVersion == "v1")
        #expect(entry.baseSnapshot == ["id": "r1", "title": "a"])
    }

    @Test func aDeleteIsNotMergedWithWhatFollows() throws {
        try enqueue(.delete, "r1", base: "v1")
        try enqueue(.update, "r1", ["title": "b"])
        try enqueue(.create, "r1", ["id": "r1"])
        // Neither delete+update nor update+create is a coalescing pair.
        #expect(try store.entries().map(\.operation) == [.delete, .update, .create])
    }

    @Test func onlyTheSameRecordOfTheSameObjectCoalesces() throws {
        try enqueue(.update, "r1", ["title": "a"])
        try enqueue(.update, "r2", ["title": "b"])
        try enqueue(.update, "r1", ["title": "c"], object: "project")
        try enqueue(.update, "r1", ["done": true])
        let entries = try store.entries()
        #expect(entries.map { "\($0.object)/\($0.recordID)" } == ["task/r1", "task/r2", "project/r1"])
        #expect(entries[0].payload == ["title": "a", "done": true])
    }

    @Test func aClaimedEntryIsNotCoalesced() throws {
        try enqueue(.update, "r1", ["title": "a"], base: "v1")
        try store.claim(try store.entries())
        #expect(try only().status == .inProgress)
        #expect(try only().sent)
        try enqueue(.update, "r1", ["title": "b"], base: "v1")
        let entries = try store.entries()
        #expect(entries.count == 2)
        #expect(entries.map(\.payload) == [["title": "a"], ["title": "b"]])
    }

    @Test func aSentEntryBackToPendingIsNotCoalesced() throws {
        try enqueue(.create, "r1", ["id": "r1", "title": "a"])
        try store.claim(try store.entries())
        try store.release(try only(), delivered: true)
        let released = try only()
        #expect(released.status == .pending && released.sent)
        try enqueue(.update, "r1", ["title": "b"])
        try enqueue(.delete, "r1")
        // The create may have reached the server: it stays, and the later changes are separate (and
        // coalesce among themselves: update+delete → delete).
        let entries = try store.entries()
        #expect(entries.map(\.operation) == [.create, .delete])
        #expect(entries[0].payload == ["id": "r1", "title": "a"])
    }

    @Test func aReleasedUndeliveredEntryCoalescesAgain() throws {
        try enqueue(.update, "r1", ["title": "a"])
        try store.claim(try store.entries())
        // A claim always marks the entry possibly delivered; a release keeps that mark.
        try store.release(try only(), delivered: false)
        #expect(try only().sent)
        try enqueue(.update, "r1", ["title": "b"])
        #expect(try store.entries().count == 2)
    }

    @Test func aFailedEntryIsNotCoalesced() throws {
        try enqueue(.update, "r1", ["title": "a"])
        try store.fail(try only(), .serverError(status: 500, retryAfter: nil))
        try enqueue(.update, "r1", ["title": "b"])
        #expect(try store.entries().map(\.status) == [.failed, .pending])
    }

    @Test func coalescingUsesTheLastEntryOfTheRecord() throws {
        try enqueue(.create, "r1", ["id": "r1", "title": "a"])
        try store.claim(try store.entries())
        try enqueue(.update, "r1", ["title": "b"])
        try enqueue(.update, "r1", ["amount": 3])
        let entries = try store.entries()
        #expect(entries.map(\.operation) == [.create, .update])
        #expect(entries[1].payload == ["title": "b", "amount": 3])
    }

    // MARK: Due entries

    @Test func dueGivesTheOldestEntryOfEachRecordInQueueOrder() throws {
        try enqueue(.update, "r1", ["title": "a"])
        try store.claim(try store.entries())
        try enqueue(.update, "r1", ["title": "b"])  // behind the claimed one
        try enqueue(.create, "r2", ["id": "r2"])
        try enqueue(.update, "r3", ["title": "c"])
        try enqueue(.delete, "r4")
        #expect(try store.due().map(\.recordID) == ["r2", "r3", "r4"])
        #expect(try store.due(limit: 2).map(\.recordID) == ["r2", "r3"])

        // A crashed push: the claim is stale, back to pending (still marked sent), and first in line.
        #expect(try store.recoverStaleClaims() == 1)
        #expect(try store.recoverStaleClaims() == 0)
        let due = try store.due()
        #expect(due.map(\.recordID) == ["r1", "r2", "r3", "r4"])
        #expect(due[0].payload == ["title": "a"] && due[0].sent && due[0].status == .pending)
    }

    @Test func completingTheHeadMakesTheNextEntryOfTheRecordDue() throws {
        try enqueue(.create, "r1", ["id": "r1", "title": "a"])
        try store.claim(try store.entries())
        try enqueue(.update, "r1", ["title": "b"])
        #expect(try store.due().isEmpty)
        let head = try #require(try store.entries().first)
        try store.complete(head, serverRecord: ["id": "r1", "title": "a", "updated_at": "v5"])
        let next = try store.due()
        #expect(next.map(\.payload) == [["title": "b"]])
        // The later change is now based on the version the server gave.
        #expect(next.first?.baseVersion == "v5")
    }

    @Test func retryableFailureHonoursRetryAfter() throws {
        try enqueue(.update, "r1", ["title": "a"])
        let start = fixture.time.now
        try store.fail(try only(), .rateLimited(retryAfter: 30))
        let failed = try only()
        #expect(failed.status == .failed && failed.attempts == 1 && failed.retryable)
        #expect(failed.nextAttemptAt == start + 30)
        #expect(failed.failure == .rateLimited(retryAfter: 30))
        #expect(try store.due().isEmpty)
        fixture.time.advance(29)
        #expect(try store.due().isEmpty)
        fixture.time.advance(1)
        #expect(try store.due().map(\.id) == [failed.id])
    }

    @Test func retryableFailureWithoutRetryAfterBacksOffExponentially() throws {
        try enqueue(.update, "r1", ["title": "a"])
        var previousDelay = 0.0
        for attempt in 1...5 {
            let start = fixture.time.now
            try store.fail(try only(), .serverError(status: 503, retryAfter: nil))
            let delay = try only().nextAttemptAt - start
            let ceiling = Double(1 << attempt)
            #expect(delay >= ceiling / 2 && delay <= ceiling, "attempt \(attempt): \(delay)")
            if attempt > 1 { #expect(delay >= previousDelay / 2) }
            previousDelay = delay
            fixture.time.advance(delay)
        }
    }

    @Test func afterEightAttemptsAnEntryIsNoLongerDueUntilRetried() throws {
        let id = try #require(try enqueue(.update, "r1", ["title": "a"]))
        for attempt in 1...maximumPushAttempts {
            #expect(try store.due().map(\.id) == [id], "before attempt \(attempt)")
            try store.fail(try only(), .serverError(status: 500, retryAfter: 5))
            fixture.time.advance(6)
        }
        #expect(try only().attempts == 8)
        fixture.time.advance(1_000_000)
        #expect(try store.due().isEmpty)
        #expect(try store.counts() == .init(pending: 0, failed: 1, conflict: 0))

        #expect(try store.retry(ids: ["q_other"]) == 0)
        #expect(try store.due().isEmpty)
        #expect(try store.retry(ids: [id]) == 1)
        let retried = try only()
        #expect(retried.status == .pending && retried.attempts == 0 && retried.nextAttemptAt == 0)
        #expect(try store.due().map(\.id) == [id])
    }

    @Test func aPermanentFailureIsNeverDueUntilRetried() throws {
        try enqueue(.update, "r1", ["title": "a"])
        try enqueue(.update, "r2", ["title": "b"])
        try store.fail(try #require(try store.entries().first), .validation(fields: []))
        let failed = try #require(try store.entries().first)
        #expect(failed.status == .failed && !failed.retryable && failed.nextAttemptAt == fixture.time.now)
        fixture.time.advance(1_000_000)
        #expect(try store.due().map(\.recordID) == ["r2"])
        #expect(try store.retry(ids: nil) == 1)
        #expect(try store.due().map(\.recordID) == ["r1", "r2"])
    }

    @Test func counts() throws {
        #expect(try store.counts() == .init(pending: 0, failed: 0, conflict: 0))
        try enqueue(.update, "r1", ["title": "a"])
        try enqueue(.update, "r2", ["title": "b"])
        try enqueue(.update, "r3", ["title": "c"])
        try enqueue(.create, "r4", ["id": "r4"])
        let entries = try store.entries()
        try store.claim([entries[0]])
        try store.fail(entries[1], .serverError(status: 500, retryAfter: nil))
        try store.markConflict(entries[2], theirs: ["id": "r3", "title": "theirs"], version: "v7")
        #expect(try store.counts() == .init(pending: 2, failed: 1, conflict: 1))
        #expect(try store.entries(statuses: [.conflict]).map(\.recordID) == ["r3"])
        let conflict = try #require(try store.entries(statuses: [.conflict]).first)
        #expect(conflict.theirs == ["id": "r3", "title": "theirs"] && conflict.theirsVersion == "v7")
        #expect(try store.entries(statuses: [.pending, .inProgress]).map(\.recordID) == ["r1", "r4"])
    }

    @Test func rebaseIsANewRequestWithANewKey() throws {
        let id = try #require(try enqueue(.update, "r1", ["title": "a"], base: "v1"))
        try store.claim(try store.entries())
        try store.markConflict(try only(), theirs: ["id": "r1", "title": "x"], version: "v2")
        try store.rebase(
            try only(), payload: ["title": "a"], operation: .update, baseVersion: "v2",
            baseSnapshot: ["id": "r1", "title": "x"])
        let rebased = try only()
        #expect(rebased.status == .pending && !rebased.sent && rebased.revision == 1 && rebased.theirs == nil)
        #expect(rebased.idempotencyKey == "\(id).1")
        #expect(rebased.baseVersion == "v2")
        // A rebased entry is an ordinary pending change again: a later edit coalesces into it.
        try enqueue(.update, "r1", ["done": true])
        #expect(try only().payload == ["title": "a", "done": true])
    }

    /// A 409 merged three ways while a later change of the record is queued (another command's edit
    /// or delete while the first was in flight): the mirror keeps showing that later change, as
    /// `complete` leaves it, instead of the merged record that drops it (or brings a deleted record
    /// back) until it is pushed.
    @Test(arguments: [false, true])
    func aMergeLeavesTheMirrorToALaterQueuedChange(laterIsDelete: Bool) throws {
        let base: [String: JSONValue] = ["id": "r1", "title": "a", "amount": 1, "updated_at": "v1"]
        try store.putRecord("task", .object(base), version: "v1")
        try enqueue(.update, "r1", ["title": "b"], base: "v1", snapshot: base)
        try store.claim(try store.entries())  // in flight: the next change is queued after it
        if laterIsDelete {
            try store.deleteRecord("task", "r1")
            try enqueue(.delete, "r1", base: "v1", snapshot: base)
        } else {
            try store.putRecord(
                "task", ["id": "r1", "title": "b", "amount": 5, "updated_at": "v1"], version: "v1")
            try enqueue(.update, "r1", ["amount": 5], base: "v1", snapshot: base)
        }
        let first = try #require(try store.entries().first)
        var report = PushReport()
        try ConflictResolver(store: store).resolveConcurrent(
            first, theirs: ["id": "r1", "title": "a", "amount": 1, "status": "done", "updated_at": "v2"],
            version: "v2", &report)
        #expect(report.merged == 1)
        #expect(try store.entries().count == 2)
        if laterIsDelete {
            #expect(try store.record("task", "r1") == nil)
        } else {
            #expect(try store.record("task", "r1")?.data["amount"] == 5)
        }
    }

    /// The server's copy fetched outside a transaction (`records get --remote`, the refresh after a
    /// discard) is stored only while no change of the record is queued — decided when it is written,
    /// so a change queued during the request stays in the mirror — and only when it is this record.
    @Test func aFetchedCopyNeverOverwritesAQueuedChange() throws {
        let base: [String: JSONValue] = ["id": "r1", "title": "a", "updated_at": "v1"]
        try store.putRecord("task", .object(base), version: "v1")
        try store.putRecord("task", ["id": "r1", "title": "mine", "updated_at": "v1"], version: "v1")
        try enqueue(.update, "r1", ["title": "mine"], base: "v1", snapshot: base)
        try store.storeFetched("task", id: "r1", ["id": "r1", "title": "server", "updated_at": "v2"])
        try store.storeFetched("task", id: "r1", nil)
        #expect(try store.record("task", "r1")?.data["title"] == "mine")
        try store.removeEntry(try only())
        try store.storeFetched("task", id: "r1", ["id": "r2", "title": "another record", "updated_at": "v2"])
        #expect(try store.record("task", "r2") == nil && store.record("task", "r1")?.data["title"] == "mine")
        try store.storeFetched("task", id: "r1", ["id": "r1", "title": "server", "updated_at": "v2"])
        #expect(try store.record("task", "r1")?.version == "v2")
        try store.storeFetched("task", id: "r1", nil)
        #expect(try store.record("task", "r1") == nil)
    }

    /// Undoing a change the server refused (`records update` whose own entry failed validation) is
    /// decided inside the transaction that drops it: a change another process queued on top of it
    /// meanwhile is never dropped with it.
    @Test func aRefusedChangeIsUndoneOnlyWhileItIsTheRecordsLatest() throws {
        let base: [String: JSONValue] = ["id": "r1", "title": "a", "updated_at": "v1"]
        try store.putRecord("task", .object(base), version: "v1")
        let id = try #require(try enqueue(.update, "r1", ["title": "b"], base: "v1", snapshot: base))
        // Another process's update merged into it while it was still pending: it holds more than
        // this command queued, and stays.
        try enqueue(.update, "r1", ["done": true], base: "v1", snapshot: base)
        try store.fail(try only(), .serverError(status: 500, retryAfter: nil))
        #expect(try store.discardIfLatest(id, payload: ["title": "b"]) == false)
        #expect(try only().payload == ["title": "b", "done": true])
        // On top of it once it failed (a failed entry is never merged into): it stays too.
        try enqueue(.update, "r1", ["amount": 2], base: "v1", snapshot: base)
        #expect(try store.discardIfLatest(id, payload: ["title": "b", "done": true]) == false)
        #expect(try store.entries().map(\.status) == [.failed, .pending])
        try store.removeEntry(try store.entries()[1])
        #expect(try store.discardIfLatest(id, payload: ["title": "b", "done": true]))
        #expect(try store.entries().isEmpty)
        #expect(try store.record("task", "r1")?.data["title"] == "a")
    }
}

// MARK: - Three-way merge

@Suite struct ThreeWayMergeTests {
    let base: [String: JSONValue] = ["id": "r1", "title": "a", "amount": 1, "status": "open", "updated_at": "v1"]

    @Test func nonOverlappingChangesMerge() {
        let theirs: [String: JSONValue] = ["id": "r1", "title": "a", "amount": 2, "status": "open", "updated_at": "v2"]
        let merge = ThreeWayMerge(base: base, mine: ["title": "b"], theirs: theirs)
        #expect(merge.localChanges == ["title": "b"])
        #expect(merge.remoteChanges == ["amount"])
        #expect(merge.conflictingFields.isEmpty)
        #expect(!merge.alreadyApplied)
        #expect(merge.merged == ["id": "r1", "title": "b", "amount": 2, "status": "open", "updated_at": "v2"])
    }

    @Test func overlappingDifferentValuesConflict() {
        let theirs: [String: JSONValue] = ["id": "r1", "title": "c", "amount": 2, "status": "open", "updated_at": "v2"]
        let merge = ThreeWayMerge(base: base, mine: ["title": "b", "status": "done"], theirs: theirs)
        #expect(merge.conflictingFields == ["title"])
        #expect(!merge.alreadyApplied)
    }

    @Test func identicalValuesAreAlreadyApplied() {
        let theirs: [String: JSONValue] = ["id": "r1", "title": "b", "amount": 1, "status": "done", "updated_at": "v2"]
        let merge = ThreeWayMerge(base: base, mine: ["title": "b", "status": "done"], theirs: theirs)
        #expect(merge.conflictingFields.isEmpty)
        #expect(merge.alreadyApplied)
        // Only part of the change on the server: not applied, and no conflict either.
        let partial = ThreeWayMerge(
            base: base, mine: ["title": "b", "status": "done"],
            theirs: ["id": "r1", "title": "b", "amount": 1, "status": "open"])
        #expect(!partial.alreadyApplied)
        #expect(partial.conflictingFields.isEmpty)
    }

    @Test func unchangedFieldsAndSystemFieldsAreNotLocalChanges() {
        let merge = ThreeWayMerge(
            base: base, mine: ["title": "a", "updated_at": "mine", "id": "other"],
            theirs: base.merging(["amount": 5]) { $1 })
        #expect(merge.localChanges.isEmpty)
        #expect(merge.alreadyApplied)
        #expect(merge.conflictingFields.isEmpty)
    }

    @Test func aFieldTheServerClearedOrAddedIsARemoteChange() {
        var theirs = base
        theirs["amount"] = nil
        theirs["owner"] = "u2"
        let merge = ThreeWayMerge(base: base, mine: ["amount": 3, "owner": "u1"], theirs: theirs)
        #expect(merge.remoteChanges == ["amount", "owner"])
        #expect(merge.conflictingFields == ["amount", "owner"])
        // Setting a field to null that the server also removed is no conflict.
        let cleared = ThreeWayMerge(base: base, mine: ["amount": nil], theirs: theirs)
        #expect(cleared.conflictingFields.isEmpty)
        #expect(cleared.alreadyApplied)
    }
}

// MARK: - Local queries

@Suite struct LocalQueryTests {
    private let fixture: Fixture
    var store: LocalStore { fixture.store }
    let schema: ObjectSchema

    static let statuses: [JSONValue?] = [
        nil, .null, "open", "in_progress", "done", "Open", "é", "1", 1, true, ["open"],
    ]
    static let titles: [JSONValue?] = [nil, .null, "", "alpha", "Alpha", "beta", "b", "10", "9", "2026-01-31", 5]
    static let estimates: [JSONValue?] = [nil, .null, 0, 1, .number(2.5), 10, -3, "7", "x", false]
    static let projects: [JSONValue?] = [nil, .null, "p1", "p2", "p3"]
    static let dones: [JSONValue?] = [nil, .null, true, false, "true"]

    init() throws {
        fixture = try Fixture()
        let item: JSONValue = [
            "name": "task", "label": "Task", "nameField": "title",
            "fields": [
                "title": ["type": "text", "label": "Title"],
                "status": ["type": "select", "label": "Status", "options": ["open", "in_progress", "done"]],
                "estimate": ["type": "number", "label": "Estimate"],
                "project_id": ["type": "lookup", "label": "Project"],
                "done": ["type": "boolean", "label": "Done"],
                "notes": ["type": "textarea", "label": "Notes"],
            ],
        ]
        schema = try #require(ObjectSchema(item: item))
    }

    /// A few hundred random records (and some of another object that must never show up).
    fileprivate func populate(_ generator: inout SeededGenerator, count: Int = 300) throws -> [JSONValue] {
        var records: [JSONValue] = []
        try store.transaction { () throws(OStackError) in
            for index in 0..<count {
                var members: [String: JSONValue] = [
                    "id": .string("tsk_" + String(String(index * 7919 % 1000 + 1000).dropFirst()))
                ]
                for (name, pool) in [
                    ("status", Self.statuses), ("title", Self.titles), ("estimate", Self.estimates),
                    ("project_id", Self.projects), ("done", Self.dones),
                ] {
                    if let value = pool.randomElement(using: &generator)! { members[name] = value }
                }
                records.append(.object(members))
                try store.putRecord("task", .object(members), version: "v\(index)")
                try store.putRecord("project", ["id": .string("prj_\(index)"), "status": "open"], version: nil)
            }
        }
        return records
    }

    /// SQLite's ORDER BY on `ostack_field`: NULL, then numbers (booleans as 0/1), then text by bytes.
    enum SQLKey: Comparable {
        case null
        case number(Double)
        case text([UInt8])

        init(_ value: JSONValue?) {
            switch value {
            case .bool(let flag)?: self = .number(flag ? 1 : 0)
            case .number(let number)?: self = .number(number)
            case .string(let text)?: self = .text(Array(text.utf8))
            default: self = .null
            }
        }

        static func < (lhs: SQLKey, rhs: SQLKey) -> Bool {
            switch (lhs, rhs) {
            case (.null, .null): false
            case (.null, _): true
            case (_, .null): false
            case (.number(let a), .number(let b)): a < b
            case (.number, .text): true
            case (.text, .number): false
            case (.text(let a), .text(let b)): a.lexicographicallyPrecedes(b)
            }
        }
    }

    func expected(_ records: [JSONValue], _ query: LocalStore.LocalQuery) -> (ids: [String], total: Int) {
        let compiled = query.filter.map { LocalFilter($0) }
        let matching = records.filter { compiled?.matches($0) ?? true }
        let sorted = matching.sorted { left, right in
            for key in query.sort {
                let a = key.field == "id" ? SQLKey(left["id"]) : SQLKey(left[key.field])
                let b = key.field == "id" ? SQLKey(right["id"]) : SQLKey(right[key.field])
                if a == b { continue }
                return key.descending ? b < a : a < b
            }
            // Ties by id in the direction of the last key, as the server's SQL driver breaks them.
            let (a, b) = (left["id"]!.stringValue!, right["id"]!.stringValue!)
            return query.sort.last?.descending == true ? b < a : a < b
        }
        let page = sorted.dropFirst(query.offset).prefix(query.limit ?? Int.max)
        return (page.map { $0["id"]!.stringValue! }, matching.count)
    }

    func actual(_ query: LocalStore.LocalQuery) throws -> (ids: [String], total: Int) {
        let result = try store.query(query)
        let scanner = FieldScanner(fields: ["id"])
        let ids = result.records.map { bytes -> String in
            if case .string(let id) = scanner.scan(bytes)[0] { return id }
            return "?"
        }
        return (ids, result.total)
    }

    @Test func trackingIndexesEqualityFieldsInTheValuesMap() throws {
        try store.track(schema)
        #expect(try store.isTracked("task"))
        #expect(try store.trackedObjects() == ["task"])
        let indexed = try store.indexedFields("task")
        // References and the name field are indexed; free text and numbers are not.
        #expect(indexed.isSuperset(of: ["project_id", "title"]))
        #expect(indexed.isDisjoint(with: ["notes", "estimate"]))
        try store.putRecord("task", ["id": "t1", "title": "Alpha", "project_id": "p1", "estimate": 3], version: "v1")
        #expect(try store.indexedValueStrings("task") == ["t1.project_id=p1", "t1.title=Alpha"])
        // The equality on an indexed field is a lookup in the values map; the schema has no custom
        // function (the stock sqlcipher shell can check and export the file).
        let condition = try FilterCondition.parse(try #require(JSONValue.parse(Array(#"["project_id","=","p1"]"#.utf8))))
        #expect(try store.query(.init(object: "task", filter: condition)).total == 1)
        #expect(
            try store.database.scalarInteger("SELECT count(*) FROM sqlite_master WHERE sql LIKE '%ostack_field%'") == 0)
        // A rewrite replaces the values; a deletion drops them.
        try store.putRecord("task", ["id": "t1", "title": "Beta"], version: "v2")
        #expect(try store.indexedValueStrings("task") == ["t1.title=Beta"])
        #expect(try store.index.allValues("task").count == 1)
        try store.deleteRecord("task", "t1")
        #expect(try store.index.allValues("task").isEmpty)
        #expect(try store.database.scalarInteger("SELECT count(*) FROM records") == 0)
        // Tracking again changes nothing.
        try store.track(schema)
        #expect(try store.indexedFields("task") == indexed)
        try store.untrack("task")
        #expect(try !store.isTracked("task"))
        #expect(try store.indexedFields("task").isEmpty)
    }

    /// A push notes what it delivered only for a tracked object (only its pulls ever pass the note
    /// and drop it), and `untrack` drops the note: before, a note for an object nobody pulls stayed
    /// in the database for good.
    @Test func deliveredVersionsAreNotedOnlyForTrackedObjects() throws {
        try store.track(schema)
        store.noteEcho("task", version: "2026-11-29T08:00:00.000Z")
        store.noteEcho("note", version: "2026-11-29T08:00:01.000Z")
        try store.saveEchoes()
        #expect(try store.echo("task") == "2026-11-29T08:00:00.000Z")
        #expect(try store.echo("note") == nil)
        try store.untrack("task")
        #expect(try store.echo("task") == nil)
        // A pull drops only the note it read: a push beside it may have saved a newer one.
        try store.setValue(LocalStore.echoKey("task"), "2026-11-29T08:00:02.000Z")
        try store.removeValue(LocalStore.echoKey("task"), ifItIs: "2026-11-29T08:00:00.000Z")
        #expect(try store.echo("task") == "2026-11-29T08:00:02.000Z")
        try store.removeValue(LocalStore.echoKey("task"), ifItIs: "2026-11-29T08:00:02.000Z")
        #expect(try store.echo("task") == nil)
    }

    /// A pull supersedes what the mirror holds for its records (docs/decisions/0013-mirror-runs.md):
    /// the record read is the pulled one, with its flags reset and its values replaced; a record that
    /// comes twice keeps its last copy; a few records take the place of the rows they supersede at
    /// once (no row is left behind).
    @Test func aPullMeetingRecordsAlreadyHereSupersedesThem() throws {
        try store.track(schema)
        try store.putRecord("task", ["id": "t1", "title": "Local", "project_id": "p1"], version: "v1")
        try store.markInvalid("task", "t1")
        func row(_ id: String, _ version: String, _ fields: String) -> (id: String, version: String?, json: [UInt8]) {
            (id, version, Array(#"{"id":"\#(id)",\#(fields)}"#.utf8))
        }
        let written = try store.transaction { () throws(OStackError) -> Int in
            try store.applyPulled(
                "task",
                [
                    row("t1", "v2", #""title":"Server""#),
                    row("t2", "v1", #""title":"First","project_id":"p2""#),
                    row("t2", "v2", #""title":"Second","project_id":"p3""#),
                    row("t3", "v1", #""title":"Q\"x\u00e9""#),
                ])
        }
        #expect(written == 4)
        #expect(try store.recordCount("task") == 3)
        #expect(try store.database.scalarInteger("SELECT count(*) FROM records") == 3)
        #expect(try store.database.scalarInteger("SELECT invalid FROM records WHERE id = 't1'") == 0)
        #expect(try store.record("task", "t1")?.version == "v2")
        #expect(try store.record("task", "t2")?.data["title"] == "Second")
        // An escaped value is stored decoded.
        #expect(
            try store.indexedValueStrings("task") == [
                "t1.title=Server", "t2.project_id=p3", "t2.title=Second", "t3.title=Q\"xé",
            ])
    }

    /// An update writes only the indexed values that changed (an incremental pull mostly changes
    /// other fields): whatever the sequence of writes, `record_fields` holds what rebuilding it from
    /// the records gives, and a change to a field that is not indexed changes the record's row only.
    @Test func anUpdateRewritesOnlyTheIndexedValuesThatChanged() throws {
        try store.track(schema)
        var generator = SeededGenerator(seed: 18)
        // (Two spellings of "é": equal as Swift strings, different bytes; rows are compared as bytes.)
        let titles = Self.titles + ["Q\"x\u{e9}", "tab\tx", "é 日本", "\u{e9}", "e\u{301}"]
        func snapshot() throws -> [[UInt8]] { try store.indexedValueRows("task") }
        func rows(_ round: Int) -> [(id: String, version: String?, json: [UInt8])] {
            (0..<60).map { index in
                var record: [String: JSONValue] = ["id": .string("t\(index)"), "notes": .string("round \(round)")]
                // Half the records keep their values from round to round; the others draw new ones.
                let keep = index % 2 == 0 && round > 0
                record["title"] = keep ? titles[index % titles.count] : titles.randomElement(using: &generator)!
                record["project_id"] =
                    keep ? Self.projects[index % Self.projects.count] : Self.projects.randomElement(using: &generator)!
                return ("t\(index)", "v\(round)", JSONValue.object(record).serialized())
            }
        }
        for round in 0..<8 {
            let written = try store.transaction { () throws(OStackError) -> Int in
                try store.applyPulled("task", rows(round))
            }
            #expect(written == 60)
            let kept = try snapshot()
            try store.rebuildValues("task")
            #expect(try snapshot() == kept, "round \(round)")
        }
        // A local write in place (`putRecord`) changes the record's row only when no indexed value
        // changed.
        try store.putRecord("task", ["id": "t0", "title": "alpha", "project_id": "p1", "notes": "x"], version: "w1")
        let before = try #require(try store.database.scalarInteger("SELECT total_changes()"))
        try store.putRecord("task", ["id": "t0", "title": "alpha", "project_id": "p1", "notes": "changed"], version: "w2")
        #expect(try store.database.scalarInteger("SELECT total_changes()").map { $0 - before } == 1)
        #expect(
            try snapshot().filter { $0.starts(with: Array("t0.".utf8)) }
                == [Array("t0.project_id=p1".utf8), Array("t0.title=alpha".utf8)])
        // Another spelling of "é" is another value (compared as bytes).
        for (title, moves) in [("\u{e9}", true), ("\u{e9}", false), ("e\u{301}", true), ("\u{e9}", true)] {
            let before = try #require(try store.database.scalarInteger("SELECT total_changes()"))
            try store.putRecord("task", ["id": "t0", "title": .string(title), "project_id": "p1"], version: nil)
            let changes = try #require(try store.database.scalarInteger("SELECT total_changes()")) - before
            #expect(moves ? changes > 1 : changes == 1, "\(title): \(changes)")
        }
        #expect(try snapshot().contains(Array("t0.title=\u{e9}".utf8)))
        let kept = try snapshot()
        try store.rebuildValues("task")
        #expect(try snapshot() == kept)
    }

    /// An indexed field named like a field the check already looks for (`id`, `updated_at`: a name
    /// field can be one) gets its value too.
    @Test func indexedFieldsNamedIdOrUpdatedAtAreFound() throws {
        let body = Array(#"{"records":[{"id":"a1","updated_at":"v1","title":"T"}],"hasMore":false}"#.utf8)
        let page = try #require(Puller.parsePage(body, indexed: ["id", "title", "updated_at"]))
        let found = try #require(page.fields.first)
        let texts = try #require(page.records.first).json.withUnsafeBytes { bytes in
            found.map { value -> String? in
                guard case .string(let range, let escaped) = value else { return nil }
                return FieldScanner.decodeString(bytes, range, escaped: escaped)
            }
        }
        #expect(texts == ["a1", "T", "v1"])
    }

    /// The indexed values the pull's checking thread finds (`Puller.parse`) and hands to the writer
    /// give exactly the `record_fields` rows the writer finds itself; values found for another set
    /// of fields (the indexed set changed meanwhile) are not used.
    @Test func fieldValuesFoundWhileCheckingAreTheOnesTheWriterWouldFind() throws {
        try store.track(schema)
        let body = Array(
            #"{"records":[{"id":"a1","updated_at":"v1","title":"Plain","project_id":"p1"},{"id":"a2","updated_at":"v1","project_id":"p\"2\u00e9","title":7},{"id":"a3","updated_at":"v2","title":null,"extra":{"title":"inner"}}],"hasMore":false}"#
                .utf8)
        let names = try store.indexedFields("task").sorted()
        let page = try #require(Puller.parsePage(body, indexed: names))
        #expect(page.records.count == 3 && page.fields.count == 3)
        func apply(_ fields: (names: [String], values: [[FieldScanner.RawValue]])?) throws -> [String] {
            try store.transaction { () throws(OStackError) in
                _ = try store.applyPulled("task", page.records, fields: fields)
            }
            defer {
                try? store.transaction { () throws(OStackError) in
                    try store.index.drop("task")
                    try store.run("DELETE FROM records")
                }
            }
            return try store.indexedValueStrings("task")
        }
        let scanned = try apply(nil)
        #expect(scanned == ["a1.project_id=p1", "a1.title=Plain", "a2.project_id=p\"2é"])
        #expect(try apply((names, page.fields)) == scanned)
        // Values for other fields (here: the right values under a wrong list) are ignored.
        #expect(try apply((["status"] + names, page.fields)) == scanned)
        #expect(try apply((names, Array(page.fields.prefix(1)))) == scanned)
        // The handed values are the ones bound (here a1's two fields swapped: still inside its bytes),
        // each with its own record, also when a record before it is skipped for a queued change.
        var swapped = page.fields
        swapped[0].swapAt(0, 1)
        try store.enqueue(
            object: "task", recordID: "a2", operation: .update, payload: ["title": "Mine"], baseVersion: nil,
            baseSnapshot: nil)
        #expect(try apply((names, swapped)) == ["a1.project_id=Plain", "a1.title=p1"])
    }

    /// The store keeps one mirror writer per object (settling a push writes records one by one); a
    /// change of the object's indexed fields, made here or by another connection, makes a new one.
    @Test func theKeptWriterFollowsTheIndexedFields() throws {
        func fields(_ id: String) throws -> [String] {
            try store.indexedValueStrings("task").filter { $0.hasPrefix(id + ".") }.map {
                String($0.dropFirst(id.count + 1).prefix { $0 != "=" })
            }
        }
        let narrow = try #require(
            ObjectSchema(item: ["name": "task", "fields": ["title": ["type": "text"]], "nameField": "title"]))
        try store.track(narrow)
        try store.putRecord("task", ["id": "k1", "title": "A", "project_id": "p1"], version: nil)
        #expect(try fields("k1") == ["title"])
        try store.track(schema)  // here: project_id is indexed now
        try store.putRecord("task", ["id": "k2", "title": "B", "project_id": "p2"], version: nil)
        #expect(try fields("k2") == ["project_id", "title"])
        // Another connection narrows the indexed fields again.
        let other = try LocalStore(
            database: AccountDatabase.open(path: store.database.path, key: fixture.key), clock: fixture.time.clock)
        try other.track(narrow)
        try store.putRecord("task", ["id": "k3", "title": "C", "project_id": "p3"], version: nil)
        #expect(try fields("k3") == ["title"])
    }

    /// Inside an open transaction the mirror writes join it (no savepoint): a failure after them
    /// undoes them with everything else.
    @Test func mirrorWritesInsideATransactionAreUndoneWithIt() throws {
        try store.track(schema)
        #expect(throws: OStackError.self) {
            try store.transaction { () throws(OStackError) in
                try store.putRecord("task", ["id": "t9", "title": "Gone"], version: "v1")
                _ = try store.applyPulled("task", [("t8", "v1", Array(#"{"id":"t8"}"#.utf8))])
                throw OStackError(.storageFailure, detail: "test")
            }
        }
        #expect(try store.recordCount("task") == 0)
        #expect(try store.index.allValues("task").isEmpty)
        #expect(try store.index.levels("task").isEmpty)
    }

    @Test func indexedEqualitiesAreOnlyNonNumericStrings() throws {
        func indexable(_ text: String) throws -> [String] {
            let condition = try FilterCondition.parse(try #require(JSONValue.parse(Array(text.utf8))))
            return LocalStore.indexableEqualities(condition).map { "\($0.0)=\($0.1.joined(separator: "|"))" }
        }
        #expect(try indexable(#"["status","=","open"]"#) == ["status=open"])
        #expect(
            try indexable(#"["and",["status","in",["open","done"]],["project_id","=","p1"],["estimate",">",1]]"#) == [
                "status=open|done", "project_id=p1",
            ])
        #expect(try indexable(#"["status","=","1"]"#) == [])  // "1" also equals the number 1
        #expect(try indexable(#"["status","in",["open",1]]"#) == [])
        #expect(try indexable(#"["status","=",true]"#) == [])
        #expect(try indexable(#"["or",["status","=","open"],["status","=","done"]]"#) == [])
        #expect(try indexable(#"["status","!=","open"]"#) == [])
        #expect(try indexable(#"{"status":{"$eq":{"$field":"title"}}}"#) == [])
    }

    /// Filter, sort, limit and offset in SQL give exactly what evaluating `LocalFilter` over every
    /// record in Swift gives, with and without the index narrowing.
    @Test func queryAgreesWithEvaluatingEveryRecord() throws {
        var generator = SeededGenerator(seed: 2026)
        let records = try populate(&generator)
        let literals: [JSONValue] = [
            "open", "in_progress", "done", "Open", "é", "p1", "p2", "alpha", "b", "10", "1", 1, 0, 10, .number(2.5),
            true, false,
        ]
        let fields = ["status", "title", "estimate", "project_id", "done", "notes", "id"]
        let sortable = ["status", "title", "estimate", "project_id", "done", "id", "notes"]
        func comparison() -> JSONValue {
            let field = fields.randomElement(using: &generator)!
            switch Int.random(in: 0..<7, using: &generator) {
            case 0, 1: return [.string(field), "=", literals.randomElement(using: &generator)!]
            case 2:
                return [
                    .string(field), "in",
                    .array(
                        (0..<Int.random(in: 1...3, using: &generator)).map { _ in
                            (["open", "done", "p1", "p3", "alpha", "Alpha", "é"] as [JSONValue]).randomElement(
                                using: &generator)!
                        }),
                ]
            case 3:
                return [
                    .string(field), .string(["!=", ">", ">=", "<", "<="].randomElement(using: &generator)!),
                    literals.randomElement(using: &generator)!,
                ]
            case 4: return [.string(field), .string(["is_null", "is_not_null"].randomElement(using: &generator)!)]
            case 5:
                return [
                    .string(field), "between",
                    [literals.randomElement(using: &generator)!, literals.randomElement(using: &generator)!],
                ]
            default:
                return [
                    .string(field),
                    .string(["contains", "startswith", "like", "ilike", "nin"].randomElement(using: &generator)!),
                    Bool.random(using: &generator)
                        ? ["a%", "%a", "_", "o", "Op%"].map(JSONValue.string).randomElement(using: &generator)!
                        : ["open", "p2"],
                ]
            }
        }
        func filter() -> JSONValue? {
            switch Int.random(in: 0..<9, using: &generator) {
            case 0: return nil
            case 1: return comparison()
            case 2:
                // A top-level conjunction with an indexable equality in it.
                let field: JSONValue = Bool.random(using: &generator) ? "project_id" : "title"
                let value = (["p1", "p3", "alpha", "b", "Alpha", "é", "zzz"] as [JSONValue]).randomElement(
                    using: &generator)!
                return ["and", [field, "=", value], comparison()]
            case 3: return ["and", comparison(), comparison()]
            case 4: return ["or", comparison(), comparison()]
            case 5: return ["$not": comparison()]
            case 6: return ["$and": [["$not": comparison()], comparison()]]
            case 7: return ["project_id": ["$in": ["p1", "p2"]], "title": ["$ne": "alpha"]]
            default: return [.string("project_id"), "in", ["p1", "p2"]]
            }
        }
        func fixArrays(_ value: JSONValue) -> JSONValue {
            // ["nin", "a%"] is not valid: nin needs a list; text operators need a string.
            guard case .array(let items) = value, items.count == 3, let op = items[1].stringValue else { return value }
            if op == "nin", items[2].stringValue != nil { return [items[0], "nin", [items[2]]] }
            if op != "nin", ["contains", "startswith", "like", "ilike"].contains(op), items[2].arrayValue != nil {
                return [items[0], .string(op), "o"]
            }
            return value
        }
        func normalised(_ value: JSONValue) -> JSONValue {
            switch value {
            case .object(let members): return .object(members.mapValues(normalised))
            case .array(let items) where items.first == "and" || items.first == "or":
                return .array([items[0]] + items.dropFirst().map(normalised))
            case .array(let items) where items.count >= 2 && items[0].stringValue != nil && items[1].stringValue != nil:
                return fixArrays(value)
            case .array(let items): return .array(items.map(normalised))
            default: return value
            }
        }

        var checked = 0
        var nonEmpty = 0
        for round in 0..<240 {
            if round == 120 { try store.track(schema) }  // the second half runs with the indexes
            // Rounds 60–119 and 180–239: many records of another object make `task` a small share of
            // the mirror, read through its keys instead of a table scan.
            if round == 60 || round == 180 {
                try store.transaction { () throws(OStackError) in
                    for index in 0..<3000 {
                        try store.putRecord("note", ["id": .string("n\(round)-\(index)")], version: nil)
                    }
                }
            }
            if round == 120 {
                try store.index.drop("note")
                try store.run("DELETE FROM records WHERE object = 'note'")
                try store.run("VACUUM")
            }
            #expect(try store.isSmallShare("task") == ((60..<120).contains(round) || round >= 180), "round \(round)")
            let wire = filter().map(normalised)
            let condition = try wire.map { (json) throws -> FilterCondition in
                do { return try FilterCondition.parse(json) } catch {
                    Issue.record("generated an invalid filter: \(String(decoding: json.serialized(), as: UTF8.self))")
                    throw error
                }
            }
            let sort = (0..<Int.random(in: 0...2, using: &generator)).map { _ in
                SortKey(field: sortable.randomElement(using: &generator)!, descending: Bool.random(using: &generator))
            }
            let limit: Int? = Bool.random(using: &generator) ? Int.random(in: 0...40, using: &generator) : nil
            let offset = Bool.random(using: &generator) ? Int.random(in: 0...60, using: &generator) : 0
            let query = LocalStore.LocalQuery(
                object: "task", filter: condition, sort: sort, limit: limit, offset: offset)
            let want = expected(records, query)
            let got = try actual(query)
            let described =
                "\(wire.map { String(decoding: $0.serialized(), as: UTF8.self) } ?? "-") sort \(sort.map(\.wire)) limit \(String(describing: limit)) offset \(offset)"
            #expect(got.total == want.total, "\(described)")
            #expect(got.ids == want.ids, "\(described)")
            checked += 1
            if !want.ids.isEmpty { nonEmpty += 1 }
        }
        #expect(checked == 240)
        #expect(nonEmpty > 60)
    }

    /// A page without a filter or sort comes from the keys map (`firstByKey`), and `id = …` /
    /// `id in (…)` through it: on a mirror of several levels — a first load, pulls that supersede
    /// some of its records, deletions, records created here — the same ids and count as evaluating
    /// every record, for every page (an empty one, one past the end, one over several levels).
    @Test func pagesAndIdLookupsThroughTheKeysAgreeWithEveryRecord() throws {
        var generator = SeededGenerator(seed: 18)
        func json(_ id: String, _ round: Int) -> [UInt8] {
            Array(#"{"id":"\#(id)","title":"r\#(round)","status":"open"}"#.utf8)
        }
        var current: [String: Int] = [:]  // id → the round of its current copy
        // A first load above the two smallest size tiers, so that the pulls' small levels are not
        // merged into it at once.
        let first = (0..<40_000).map { "k" + String(($0 * 7919) % 100_000 + 100_000) }
        let load = try store.firstLoad("task")
        _ = try store.applyPulled("task", first.map { ($0, "v0", json($0, 0)) }, load: load)
        for id in first { current[id] = 0 }
        for round in 1...4 {
            // Pulls meeting records already here (a newer level supersedes them) and bringing new ones.
            // Large enough to be a level of its own (a few records are written into the level
            // holding them), small enough not to be merged at once.
            let ids = (0..<3_000).map { _ in "k" + String(Int.random(in: 100_000..<106_000, using: &generator)) }
            let distinct = Array(Set(ids)).sorted()
            _ = try store.applyPulled("task", distinct.map { ($0, "v\(round)", json($0, round)) })
            for id in distinct { current[id] = round }
            for id in current.keys.sorted().shuffled(using: &generator).prefix(5) {
                try store.deleteRecord("task", id)
                current[id] = nil
            }
            try store.putRecord("task", ["id": .string("n\(round)"), "title": "here"], version: nil)
            current["n\(round)"] = -1
        }
        let levels = try store.index.levels("task")
        #expect(levels.count > 2 && levels.dropFirst().contains(where: \.supersedes), "\(levels)")
        let all = current.keys.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
        for (limit, offset) in [(0, 0), (1, 0), (50, 0), (50, 30), (1000, 0), (10, all.count - 3), (5, all.count + 7)] {
            let got = try actual(.init(object: "task", limit: limit, offset: offset))
            #expect(got.total == all.count, "limit \(limit) offset \(offset)")
            #expect(got.ids == Array(all.dropFirst(offset).prefix(limit)), "limit \(limit) offset \(offset)")
        }
        for _ in 0..<20 {
            let asked = (0..<Int.random(in: 1...6, using: &generator)).map { _ in
                "k" + String(Int.random(in: 100_000..<106_500, using: &generator))
            }
            let filter: FilterCondition =
                asked.count == 1
                ? .compare(field: "id", op: .eq, operand: .value(.string(asked[0])))
                : .compare(field: "id", op: .in, operand: .value(.array(asked.map(JSONValue.string))))
            let got = try actual(.init(object: "task", filter: filter, limit: 50))
            let want = all.filter(Set(asked).contains)
            #expect(got.ids == want && got.total == want.count, "\(asked)")
        }
    }

    /// The page of a query in id order is kept in a bounded heap (`SmallestIDs`): the same ids, in
    /// the same (byte) order, as sorting every match.
    @Test func smallestIDsKeepsThePageInByteOrder() {
        var generator = SeededGenerator(seed: 7)
        let alphabet = Array("aAbB0-_z".utf8)
        for capacity in [0, 1, 2, 5, 50, 500] {
            var heap = SmallestIDs(capacity: capacity)
            var all: [[UInt8]] = []
            for rid in 0..<300 {
                let id = (0..<Int.random(in: 1...4, using: &generator)).map { _ in
                    alphabet.randomElement(using: &generator)!
                }
                guard !all.contains(id) else { continue }  // ids are unique per object
                all.append(id)
                id.withUnsafeBytes { heap.offer($0, rid: Int64(rid)) }
            }
            let expected = Array(all.sorted { $0.lexicographicallyPrecedes($1) }.prefix(capacity))
            #expect(heap.ascending().map(\.id) == expected, "capacity \(capacity)")
        }
    }

    /// Offset and limit from the command line cannot overflow their sum, on either query path.
    @Test func aHugeLimitWithAnOffsetIsAPageNotACrash() throws {
        for index in 0..<5 { try store.putRecord("task", ["id": .string("t\(index)")], version: nil) }
        for sort in [[], [SortKey(field: "title", descending: false)]] {
            let result = try actual(.init(object: "task", sort: sort, limit: Int.max, offset: 2))
            #expect(result.total == 5 && result.ids.count == 3, "\(sort)")
        }
    }

    /// The same query gives the same rows whether an index narrows it (SQL text equality) or not
    /// (LocalFilter alone): strings are equal only with the same code points in both.
    @Test func indexNarrowingDoesNotChangeResults() throws {
        try store.putRecord("task", ["id": "t1", "title": "e\u{301}", "project_id": "p\u{e9}"], version: "v1")
        try store.putRecord("task", ["id": "t2", "title": "\u{e9}", "project_id": "pe\u{301}"], version: "v1")
        func ids(_ field: String, _ value: String) throws -> [String] {
            let query = LocalStore.LocalQuery(
                object: "task", filter: .compare(field: field, op: .eq, operand: .value(.string(value))))
            return try actual(query).ids
        }
        let cases = [
            ("title", "\u{e9}"), ("title", "e\u{301}"), ("project_id", "p\u{e9}"), ("project_id", "pe\u{301}"),
        ]
        let untracked = try cases.map { try ids($0.0, $0.1) }
        #expect(untracked == [["t2"], ["t1"], ["t1"], ["t2"]])
        try store.track(schema)
        #expect(try store.indexedFields("task").isSuperset(of: ["title", "project_id"]))
        #expect(try cases.map { try ids($0.0, $0.1) } == untracked)
    }

    @Test func queryOfAnotherOrAnInvalidObjectIsEmpty() throws {
        var generator = SeededGenerator(seed: 1)
        _ = try populate(&generator, count: 20)
        #expect(try store.query(.init(object: "task")).total == 20)
        #expect(try store.query(.init(object: "project")).total == 20)
        #expect(try store.query(.init(object: "contact")).total == 0)
        #expect(try store.query(.init(object: "task' OR 1=1 --")).total == 0)
    }
}

/// A database written before failures had typed columns (`last_error` prose) is migrated once.
/// Migration `0005-mirror-rowid` on a database written by the previous schema (0001–0004): the
/// records, their versions and flags, and the tracked objects' indexed fields survive; the
/// expression indexes over `ostack_field` are gone.
@Suite struct MirrorMigrationTests {
    static func legacyDatabase(_ path: String, _ key: SecretBytes) throws {
        let database = try databaseOfRelease(migrations: 4, path: path, key: key)
        try database.execute("INSERT INTO tracked (object, indexed_fields) VALUES ('task', 'project_id,title')")
        try database.execute(
            #"CREATE INDEX "ix_task__title" ON records (object, ostack_field(data, 'title')) WHERE object = 'task'"#)
        for index in 0..<500 {
            try database.execute(
                "INSERT INTO records (object, id, data, version, schema_version, invalid) VALUES ('task', ?, ?, ?, 2, ?)",
                [
                    .text("r\(index)"),
                    .text(#"{"id":"r\#(index)","project_id":"p\#(index % 7)","title":"T\#(index)"}"#),
                    .text("v\(index)"), .integer(Int64(index % 2)),
                ])
        }
    }

    @Test func previousMirrorIsMigrated() throws {
        let directory = TemporaryDirectory()
        let path = directory.appending("account.db")
        let key = SecretBytes(randomCount: 32)
        try Self.legacyDatabase(path, key)
        let store = try LocalStore(database: try AccountDatabase.open(path: path, key: AccountDataKey(key)))
        #expect(try store.recordCount("task") == 500)
        #expect(try store.record("task", "r42")?.version == "v42")
        #expect(try store.rows("SELECT count(*) AS n FROM records WHERE invalid = 1").first?.int("n") == 250)
        #expect(try store.rows("SELECT count(*) AS n FROM records WHERE schema_version = 2").first?.int("n") == 500)
        #expect(try store.index.allValues("task").count == 1000)
        #expect(
            try store.database.scalarInteger("SELECT count(*) FROM sqlite_master WHERE sql LIKE '%ostack_field%'") == 0)
        let condition = try FilterCondition.parse(
            try #require(JSONValue.parse(Array(#"["project_id","=","p3"]"#.utf8))))
        #expect(try store.query(.init(object: "task", filter: condition)).total == 71)
        #expect(try store.database.integrityProblem() == nil)
    }
}

/// Migration `0006-mirror-runs` on a database of the previous schema (0001–0005): every record is
/// found by id and by the values of its indexed fields as before, its flags kept; the old index,
/// table and trigger are gone, and so is every structure keyed by ids that SQLite would maintain.
@Suite struct MirrorRunsMigrationTests {
    @Test func aMirrorOfRecordsKeyAndRecordFieldsBecomesOneLevel() throws {
        let directory = TemporaryDirectory()
        let path = directory.appending("account.db")
        let key = SecretBytes(randomCount: 32)
        do {
            let database = try databaseOfRelease(migrations: 5, path: path, key: key)
            try database.execute("INSERT INTO tracked (object, indexed_fields) VALUES ('task', 'project_id,title')")
            // As the 0005 writer wrote them: rows in random id order, then their text values.
            var generator = SeededGenerator(seed: 5)
            for index in 0..<700 {
                let id = String((0..<16).map { _ in "abcdefghijkmnpqrstuvwxyz23456789".randomElement(using: &generator)! })
                let project = "p\(index % 9)"
                try database.execute(
                    "INSERT INTO records (object, id, data, version, invalid) VALUES ('task', ?, ?, ?, ?)",
                    [
                        .text(id), .text(#"{"id":"\#(id)","project_id":"\#(project)","title":"T\#(index)"}"#),
                        .text("v\(index)"), .integer(Int64(index % 2)),
                    ])
                let rid = database.lastInsertRowID
                try database.execute(
                    "INSERT INTO record_fields (rid, field, object, value) VALUES (?, 'project_id', 'task', ?), (?, 'title', 'task', ?)",
                    [.integer(rid), .text(project), .integer(rid), .text("T\(index)")])
            }
            try database.execute("INSERT INTO records (object, id, data) VALUES ('project', 'p1', '{\"id\":\"p1\"}')")
        }
        let store = try LocalStore(database: try AccountDatabase.open(path: path, key: AccountDataKey(key)))
        #expect(try store.recordCount("task") == 700)
        #expect(try store.recordCount("project") == 1)
        #expect(try store.index.levels("task").count == 1)
        #expect(try store.indexedValueRows("task").count == 1400)
        let condition = try FilterCondition.parse(try #require(JSONValue.parse(Array(#"["project_id","=","p3"]"#.utf8))))
        #expect(try store.query(.init(object: "task", filter: condition)).total == 78)
        let title = try FilterCondition.parse(try #require(JSONValue.parse(Array(#"["title","=","T42"]"#.utf8))))
        let found = try store.query(.init(object: "task", filter: title))
        #expect(found.total == 1)
        let first = try #require(found.records.first)
        let id = try #require(JSONValue.parse(first)?["id"]?.stringValue)
        #expect(try store.record("task", id)?.version == "v42")
        #expect(try store.rows("SELECT count(*) AS n FROM records WHERE invalid = 1").first?.int("n") == 350)
        let names = try store.rows("SELECT name FROM sqlite_master WHERE type IN ('index', 'table', 'trigger')")
            .compactMap { $0.text("name") }
        #expect(!names.contains("records_key") && !names.contains("record_fields") && !names.contains("records_drop_fields"))
        #expect(try store.database.integrityProblem() == nil)
    }
}

@Suite struct QueueFailureMigrationTests {
    @Test func legacyFailureTextBecomesTypedColumns() throws {
        let directory = TemporaryDirectory()
        let path = directory.appending("account.db")
        let key = SecretBytes(randomCount: 32)
        do {
            // The schema as the previous release wrote it: migrations 0001–0003 only.
            let database = try databaseOfRelease(migrations: 3, path: path, key: key)
            let legacy = [
                ("q_1", "validation: title, amount"), ("q_2", "rate-limited"), ("q_3", "conflict"),
                ("q_4", "unknown-object"), ("q_5", "validation"),
            ]
            for (index, (id, text)) in legacy.enumerated() {
                try database.execute(
                    "INSERT INTO queue (id, object, record_id, operation, status, last_error, created_at, updated_at) VALUES (?, 'task', ?, 'update', 'failed', ?, 0, 0)",
                    [.text(id), .text("r\(index)"), .text(text)])
            }
        }
        let store = try LocalStore(database: try AccountDatabase.open(path: path, key: AccountDataKey(key)))
        let failures: [PushFailure?] = try store.entries().map { $0.failure }
        #expect(
            failures == [
                .validation(fields: ["title", "amount"]), .rateLimited(retryAfter: nil), nil,
                .unexpected(status: 0, code: nil), .validation(fields: []),
            ])
        #expect(try store.rows("SELECT count(*) AS n FROM queue WHERE last_error IS NOT NULL").first?.int("n") == 0)
    }
}

/// A database as a previous release left it: only the first `migrations` migrations applied.
func databaseOfRelease(migrations: Int, path: String, key: SecretBytes) throws -> Database {
    let database = try AccountDatabase.openTryingPageSizes(path: path, key: DatabaseKey(key))
    try LocalStore.registerFunctions(database)
    try Migrator(Array(AccountDatabase.migrator.migrations.prefix(migrations))).migrate(database)
    return database
}
