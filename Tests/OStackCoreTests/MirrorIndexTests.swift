import OStackTestSupport
import SQLCipherKit
import SodiumKit
import Testing

@testable import OStackCore

/// The mirror's maps (`MirrorIndex`, docs/decisions/0013-mirror-runs.md) against a model: whatever
/// mix of pulls (levels), local writes in place, deletions, renames, merges and rebuilds, every id
/// reads its last write, the values map names exactly the current records' values, the rows no level
/// names are exactly the superseded ones, and a merge of everything leaves one level and no
/// superseded row.
@Suite struct MirrorIndexTests {
    let directory = TemporaryDirectory()
    let key = AccountDataKey(SecretBytes(randomCount: 32))
    let store: LocalStore
    let schema: ObjectSchema

    init() throws {
        store = try LocalStore(database: try AccountDatabase.open(path: directory.appending("account.db"), key: key))
        schema = try #require(
            ObjectSchema(item: [
                "name": "task", "nameField": "title",
                "fields": [
                    "title": ["type": "text"], "project_id": ["type": "lookup", "reference": "project"],
                    "notes": ["type": "textarea"],
                ],
            ]))
        try store.track(schema)
    }

    /// The record a model write gives.
    static func record(_ id: String, _ generation: Int, using generator: inout SeededGenerator) -> [UInt8] {
        var members: [String: JSONValue] = ["id": .string(id), "notes": .string("gen \(generation)")]
        // Titles from a small set (so values repeat across records); sometimes missing, a number,
        // escaped or non-ASCII.
        let titles: [JSONValue?] = [nil, "alpha", "beta", "Q\"x", "é", "e\u{301}", "", 7, "tab\tx"]
        if let title = titles.randomElement(using: &generator)! { members["title"] = title }
        if Bool.random(using: &generator) { members["project_id"] = .string("p\(Int.random(in: 0..<5, using: &generator))") }
        return JSONValue.object(members).serialized()
    }

    /// Checks the store against `model` (id → record bytes).
    func check(_ model: [String: [UInt8]], _ context: String) throws {
        #expect(try store.recordCount("task") == model.count, "\(context)")
        for (id, bytes) in model {
            let stored = try store.record("task", id)
            #expect(stored?.data == JSONValue.parse(bytes), "\(context): \(id)")
        }
        // Keys in order, each once, exactly the model's ids.
        var keys: [[UInt8]] = []
        var currentRIDs = Set<Int64>()
        try store.index.forEachCurrentKey("task") { key, rid throws(OStackError) in
            keys.append(Array(key))
            currentRIDs.insert(rid)
            return true
        }
        #expect(keys == model.keys.map { Array($0.utf8) }.sorted { $0.lexicographicallyPrecedes($1) }, "\(context)")
        // Rows: the current ones plus the superseded ones, nothing else.
        let levels = try store.index.levels("task")
        let superseded = try store.index.superseded("task", levels: levels)
        let rows = Set(try store.rows("SELECT rid FROM records WHERE object = 'task'").compactMap { $0.int("rid") })
        #expect(rows == currentRIDs.union(superseded), "\(context)")
        #expect(currentRIDs.isDisjoint(with: superseded), "\(context)")
        // Values: what the records give.
        var expected: [[UInt8]] = []
        let scanner = FieldScanner(fields: ["project_id", "title"])
        for (id, bytes) in model {
            let values = bytes.withUnsafeBytes { scanner.scan($0) }
            for (field, value) in zip(["project_id", "title"], values) {
                if case .string(let text) = value { expected.append(Array("\(id).\(field)=\(text)".utf8)) }
            }
        }
        let actual = try store.indexedValueRows("task")
        #expect(Set(actual) == Set(expected) && actual.count == expected.count, "\(context)")
        // Level counts match what the levels hold.
        for level in levels {
            let counted = try store.rows(
                "SELECT map, sum(count) AS n FROM mirror_chunks WHERE run = ? GROUP BY map", [.integer(level.run)])
            let keys = counted.first { $0.int("map") == 0 }?.int("n") ?? 0
            let values = counted.first { $0.int("map") == 1 }?.int("n") ?? 0
            #expect(Int(keys) == level.keys && Int(values) == level.values, "\(context): level \(level.run)")
        }
        // Many ids at once (here and not here) find what each one alone finds, reading each level
        // whole or id by id.
        var asked = Set(model.keys)
        for n in 0..<60 { asked.insert(n % 2 == 0 ? "t\(n * 7)" : "u\(n)") }
        asked.formUnion(["", "t", "t1\u{0}"])
        for factor in [0, 16, Int.max / 4] {
            store.index.wholeLevelFactor = factor
            let many = try store.index.current("task", asked, in: levels)
            for id in asked {
                let one = try store.index.current("task", id, in: levels)
                #expect(many[id]?.rid == one?.rid && many[id]?.run == one?.run, "\(context): \(id), factor \(factor)")
            }
            #expect(Set(many.keys) == Set(model.keys), "\(context): factor \(factor)")
        }
        store.index.wholeLevelFactor = 16
        // Lookups by value find exactly the current records with that value.
        for title in ["alpha", "é", "Q\"x", ""] {
            let condition = try FilterCondition.parse(.array(["title", "=", .string(title)]))
            let found = try store.query(.init(object: "task", filter: condition)).total
            // (Compared as bytes: "é" and "e\u{301}" are equal Swift strings, different values.)
            let want = model.values.filter { bytes in
                guard case .string(let text) = bytes.withUnsafeBytes({ scanner.scan($0)[1] }) else { return false }
                return Array(text.utf8) == Array(title.utf8)
            }.count
            #expect(found == want, "\(context): title = \(title)")
        }
    }

    @Test(arguments: [880, 40])
    func randomOperationsKeepTheMapsTrue(chunkLimit: Int) throws {
        store.index.chunkLimit = chunkLimit
        var generator = SeededGenerator(seed: UInt64(chunkLimit))
        var model: [String: [UInt8]] = [:]
        var generation = 0
        func id() -> String { "t\(Int.random(in: 0..<400, using: &generator))" }
        for step in 0..<120 {
            generation += 1
            switch Int.random(in: 0..<10, using: &generator) {
            case 0..<4:
                // A pull: a batch (small or large), some ids twice, mostly records already here.
                let count = [3, 70, 150, 300].randomElement(using: &generator)!
                var rows: [(id: String, version: String?, json: [UInt8])] = []
                for _ in 0..<count {
                    let id = id()
                    let bytes = Self.record(id, generation, using: &generator)
                    rows.append((id, "v\(generation)", bytes))
                    model[id] = bytes
                }
                _ = try store.transaction { () throws(OStackError) -> Int in try store.applyPulled("task", rows) }
            case 4..<6:
                let id = id()
                let bytes = Self.record(id, generation, using: &generator)
                try store.putRecord("task", try #require(JSONValue.parse(bytes)), version: nil)
                model[id] = bytes
            case 6:
                let id = id()
                try store.deleteRecord("task", id)
                model[id] = nil
            case 7:
                // A rename onto another id (whose copy gives way).
                let from = id()
                let to = id()
                guard from != to, let bytes = model[from] else { continue }
                try store.transaction { () throws(OStackError) in try store.renameRecord("task", from: from, to: to) }
                var record = try #require(JSONValue.parse(bytes)?.objectValue)
                record["id"] = .string(to)  // the stored text names the new id too
                model[to] = JSONValue.object(record).serialized()
                model[from] = nil
            case 8:
                try store.transaction { () throws(OStackError) in try store.index.mergeAll("task") }
                #expect(try store.index.levels("task").count <= 1)
                #expect(try store.index.superseded("task", levels: try store.index.levels("task")).isEmpty)
            default:
                try store.transaction { () throws(OStackError) in try store.rebuildValues("task") }
            }
            try check(model, "step \(step)")
        }
        // The binary counter keeps few levels.
        #expect(try store.index.levels("task").count <= 12)
        #expect(try store.database.integrityProblem() == nil)
    }

    /// A first load over many transactions (a first pull) keeps its levels disjoint — a record that
    /// comes again replaces its earlier copy at once — so nothing is superseded and queries look for
    /// no superseded rows; its levels are merged by size tier and stay few.
    @Test func aFirstLoadKeepsItsLevelsDisjointAndFew() throws {
        var generator = SeededGenerator(seed: 7)
        let load = try #require(try store.firstLoad("task"))
        var model: [String: [UInt8]] = [:]
        for batch in 0..<40 {
            let rows = (0..<250).map { index -> (id: String, version: String?, json: [UInt8]) in
                // One record in fifty comes again in a later batch (changed on the server meanwhile).
                let id = index % 50 == 0 && batch > 0 ? "b\(batch - 1)-\(index + 1)" : "b\(batch)-\(index)"
                let bytes = Self.record(id, batch, using: &generator)
                model[id] = bytes
                return (id, "v", bytes)
            }
            _ = try store.transaction { () throws(OStackError) -> Int in
                try store.applyPulled("task", rows, load: load)
            }
        }
        let levels = try store.index.levels("task")
        #expect(levels.count <= MirrorIndex.maxLevels, "\(levels)")
        #expect(levels.count < 40, "\(levels)")
        #expect(!MirrorIndex.maySupersede(levels), "\(levels)")
        #expect(try store.database.scalarInteger("SELECT count(*) FROM records") == Int64(model.count))
        try check(model, "first load")
        // Once the object is held, there is no first load.
        #expect(try store.firstLoad("task") == nil)
    }

    /// Another process writes a record of the object between two transactions of a first load (a
    /// `records get --remote`, a push): the load goes on as an ordinary pull, so when the server's
    /// copy of that record comes it replaces the other process's instead of standing beside it.
    @Test func aFirstLoadThatAnotherProcessWroteIntoGoesOnAsAPull() throws {
        var generator = SeededGenerator(seed: 11)
        let load = try #require(try store.firstLoad("task"))
        var model: [String: [UInt8]] = [:]
        func batch(_ ids: [String], _ generation: Int) -> [(id: String, version: String?, json: [UInt8])] {
            ids.map { id in
                let bytes = Self.record(id, generation, using: &generator)
                model[id] = bytes
                return (id, "v\(generation)", bytes)
            }
        }
        let first = batch((0..<100).map { "a\($0)" }, 1)
        _ = try store.transaction { () throws(OStackError) -> Int in try store.applyPulled("task", first, load: load) }
        // The other process: its own connection to the same file.
        let other = try LocalStore(database: try AccountDatabase.open(path: directory.appending("account.db"), key: key))
        try other.putRecord("task", ["id": "late", "title": "alpha"], version: "v0")
        model["late"] = JSONValue.object(["id": "late", "title": "alpha"]).serialized()
        let second = batch((0..<100).map { "b\($0)" } + ["late"], 2)
        _ = try store.transaction { () throws(OStackError) -> Int in try store.applyPulled("task", second, load: load) }
        #expect(load.abandoned)
        #expect(try store.record("task", "late")?.version == "v2")
        try check(model, "after another process's write")
    }

    /// A record refused on a later page of a transaction that already brought a valid copy of it is
    /// flagged on the copy that ends up current (the earlier page's), not on one that copy supersedes.
    @Test func aRejectedRecordFlagsTheCopyThatEndsUpCurrent() throws {
        try store.putRecord("task", ["id": "x", "title": "old"], version: "v1")
        _ = try store.transaction { () throws(OStackError) -> Int in
            let bulk = try store.bulkWriter(for: "task")
            let count = try store.applyPulled(
                "task", [(id: "x", version: "v2", json: Array(#"{"id":"x","title":"new"}"#.utf8))], fields: nil,
                into: bulk)
            try bulk.finish()
            try store.markInvalid("task", "x")
            return count
        }
        #expect(try store.record("task", "x")?.version == "v2")
        #expect(try store.rows("SELECT invalid FROM records WHERE object = 'task'").map { $0.int("invalid") } == [1])
    }

    /// An object over `maxLevels` merges its newest small levels among themselves, not into the large
    /// levels a first load wrote; equal levels go `mergeWidth` at a time; never fewer than two.
    @Test func tooManyLevelsMergeTheSmallNewestOnes() {
        let load = Array(repeating: 50_000, count: 20)
        #expect(MirrorIndex.overflowMerge(load + Array(repeating: 1000, count: 5)) == 5)
        #expect(MirrorIndex.overflowMerge(load + [5000, 1000, 1000, 1000, 1000]) == 4)
        #expect(MirrorIndex.overflowMerge(load + [16_000, 8000, 4000, 2000, 1000]) == 2)
        #expect(MirrorIndex.overflowMerge(load + [1000, 2000, 4000]) == 3)  // smaller ones are older
        #expect(MirrorIndex.overflowMerge(load + [30_000]) == MirrorIndex.mergeWidth)  // as large as them
        #expect(MirrorIndex.overflowMerge(Array(repeating: 50_000, count: 30)) == MirrorIndex.mergeWidth)
        #expect(MirrorIndex.overflowMerge([7, 3]) == 2)
        // Over 200 pulls of 1 000 into a 1 000 000-entry load (this rule alone, without compact's
        // other two), every choice merges two to eight of the newest levels, and the policy
        // rewrites more than five times less than merging the newest eight did.
        func simulate(_ pick: ([Int]) -> Int) -> Int {
            var sizes = load
            var rewritten = 0
            for _ in 0..<200 {
                sizes.append(1000)
                while sizes.count > MirrorIndex.maxLevels {
                    let count = pick(sizes)
                    #expect(count >= 2 && count <= min(MirrorIndex.mergeWidth, sizes.count), "\(count) of \(sizes)")
                    let merged = sizes.suffix(count).reduce(0, +)
                    sizes.removeLast(count)
                    sizes.append(merged)
                    rewritten += merged
                }
            }
            return rewritten
        }
        let overflow = simulate(MirrorIndex.overflowMerge)
        let newestEight = simulate { _ in MirrorIndex.mergeWidth }
        #expect(overflow * 5 < newestEight, "\(overflow) against \(newestEight)")
    }

    /// A level whose counts no mirror could hold (a damaged or edited row) is a storage error, never
    /// an overflow trap in the merge policy's sums.
    @Test func absurdLevelCountsAreDamageNotATrap() throws {
        try store.putRecord("task", ["id": "t1", "title": "alpha"], version: nil)
        try store.run("UPDATE mirror_levels SET keys = 9223372036854775807")
        do {
            _ = try store.recordCount("task")
            Issue.record("no error")
        } catch {
            #expect(error.code == .storageFailure)
        }
        #expect(throws: OStackError.self) { try store.index.compact("task") }
    }

    /// Many levels each of the largest count a level may claim: the sums that decide how superseded
    /// rows are found saturate instead of trapping.
    @Test func manyHugeLevelsAreNoTrap() throws {
        try store.putRecord("task", ["id": "t1", "title": "alpha"], version: nil)
        for run in 0..<1_100 {
            try store.run(
                "INSERT INTO mirror_levels (object, run, keys, vals, supersedes) VALUES ('task', ?, ?, 0, 1)",
                [.integer(Int64(100_000 + run)), .integer(MirrorIndex.largestCount)])
        }
        let levels = try store.index.levels("task")
        #expect(levels.count > 1_000)
        #expect(try store.index.superseded("task", levels: levels).isEmpty)
    }

    /// Levels that may supersede (pulls into a held object) are all merged once they hold half of
    /// the object's entries: superseded rows never outnumber the live ones.
    @Test func supersedingLevelsAreMergedBeforeTheyHoldHalfTheEntries() throws {
        var generator = SeededGenerator(seed: 9)
        let ids = (0..<2000).map { "r\($0)" }
        let first = ids.map { id in (id: id, version: String?.none, json: Self.record(id, 0, using: &generator)) }
        _ = try store.transaction { () throws(OStackError) -> Int in try store.applyPulled("task", first) }
        for round in 1...30 {
            let changed = (0..<100).map { _ in ids.randomElement(using: &generator)! }
            let rows = changed.map { id in (id: id, version: String?.none, json: Self.record(id, round, using: &generator)) }
            _ = try store.transaction { () throws(OStackError) -> Int in try store.applyPulled("task", rows) }
            let levels = try store.index.levels("task")
            let superseded = try store.index.superseded("task", levels: levels)
            let flagged = levels.dropFirst().filter(\.supersedes).reduce(0) { $0 + $1.size }
            #expect(flagged * 2 < levels.reduce(0) { $0 + $1.size }, "round \(round): \(levels)")
            #expect(superseded.count < 2000, "round \(round): \(superseded.count) of \(levels)")
            #expect(try store.recordCount("task") == 2000)
        }
    }

    /// A damaged chunk (here: a length running past its end) is a storage error, never a crash or a
    /// read outside it.
    @Test func aDamagedChunkIsAnError() throws {
        try store.putRecord("task", ["id": "t1", "title": "alpha"], version: nil)
        try store.run("UPDATE mirror_chunks SET entries = x'7f0102' WHERE map = 0")
        #expect(throws: OStackError.self) { _ = try store.record("task", "t1") }
        try store.run("UPDATE mirror_chunks SET entries = x'00027431808080808080808080808001' WHERE map = 0")
        #expect(throws: OStackError.self) { _ = try store.record("task", "t1") }
        // A shared prefix longer than the key before it.
        try store.run("UPDATE mirror_chunks SET entries = x'0501740102' WHERE map = 0")
        #expect(throws: OStackError.self) { _ = try store.record("task", "t1") }
        do {
            _ = try store.record("task", "t1")
        } catch {
            #expect(error.code == .storageFailure)
        }
    }

    /// Chunk entries round-trip, and every truncation of an encoded chunk is refused.
    @Test func chunkCodecRefusesEveryTruncation() throws {
        var buffer: [UInt8] = []
        let entries: [([UInt8], Int64)] = [
            ([], 1), (Array("a".utf8), 127), (Array(repeating: 0x41, count: 300), 1 << 40),
            (Array(repeating: 0x41, count: 302), 5),
        ]
        var previous: [UInt8] = []
        for (key, rid) in entries {
            key.withUnsafeBytes { k in previous.withUnsafeBytes { MirrorChunk.append(key: k, rid: rid, after: $0, to: &buffer) } }
            previous = key
        }
        let decoded = try buffer.withUnsafeBytes { try MirrorChunk.decode($0) }
        #expect(decoded.map(\.key) == entries.map(\.0) && decoded.map(\.rid) == entries.map(\.1))
        #expect(buffer.count == 322)
        // A prefix ending between entries (after 3, 7 and 316 bytes) is a shorter valid chunk; any
        // other is refused. (The last entry takes 300 bytes of the key before it.)
        for length in 1..<buffer.count {
            let prefix = Array(buffer.prefix(length))
            let result = try? prefix.withUnsafeBytes { try MirrorChunk.decode($0) }
            switch length {
            case 3: #expect(result?.count == 1)
            case 7: #expect(result?.count == 2)
            case 316: #expect(result?.count == 3)
            default: #expect(result == nil, "\(length)")
            }
        }
    }
}
