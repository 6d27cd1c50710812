import SQLCipherKit

/// The mirror's two maps, kept by ostack beside `records` (docs/decisions/0013-mirror-runs.md):
/// the keys map (`id` → `rid`) and the values map (`field`, `value` → `rid`, for the indexed fields).
///
/// Both are stored as **levels**: sorted runs of packed entries (`mirror_chunks`, a few hundred bytes
/// each), one level holding both maps of some of an object's records. A level is numbered by a
/// run number that only grows (`mirror_levels`), and a newer level wins: the current `rid` of a key is
/// the one in the newest level holding it; the rows that older levels name for the same key are
/// superseded (not visible, deleted when their level is merged). A record's indexed values are in
/// the level of its key.
///
/// A pull appends a level per transaction: its entries sorted in memory and written in order, whole
/// chunks at the end of the table, so that no page of an existing map is read or rewritten however
/// large the mirror is. `compact` merges levels by size tier and whenever superseded rows could
/// outnumber live ones, so an object keeps a few dozen levels at most and each entry is rewritten a
/// few times over its life. Small writes (a local edit, an acknowledged push) change the chunk that
/// holds their entry in place.
///
/// Every method runs inside the caller's transaction (or as its own statement); none caches what it
/// read, so what another process committed is always seen.
final class MirrorIndex {
    // A LocalStore owns one; both are used by one thread at a time.
    unowned let store: LocalStore
    /// Bytes of entries per chunk: a chunk row (about 60 bytes more) stays within what a B-tree page
    /// of this database keeps in the page itself (about 990 bytes of 4 KiB pages with SQLCipher's
    /// reserved bytes, 220 of 1 KiB pages), so reading a chunk never reads an overflow page.
    var chunkLimit: Int
    /// `current` of many ids reads a level whole when it holds at most this many keys per id asked
    /// (a lookup reads a chunk of about 50 entries; tests set 0 or a huge value to take one way).
    var wholeLevelFactor = 16

    enum Map: Int64 {
        case keys = 0
        case values = 1
    }

    struct Level: Equatable, Sendable {
        var run: Int64
        var keys: Int
        var values: Int
        /// Whether its keys may supersede rows that older levels name: false for the levels of a first
        /// pull into an object the mirror did not hold, and of records created here.
        var supersedes = true
        var size: Int { keys + values }
    }

    /// Migration `0006-mirror-runs`'s tables.
    static let schema = """
        CREATE TABLE mirror_levels (
            object TEXT NOT NULL, run INTEGER NOT NULL, keys INTEGER NOT NULL, vals INTEGER NOT NULL,
            supersedes INTEGER NOT NULL DEFAULT 1,
            PRIMARY KEY (object, run)) WITHOUT ROWID;
        CREATE TABLE mirror_chunks (
            run INTEGER NOT NULL, map INTEGER NOT NULL, fkey BLOB NOT NULL, frid INTEGER NOT NULL,
            count INTEGER NOT NULL, entries BLOB NOT NULL,
            PRIMARY KEY (run, map, fkey, frid)) WITHOUT ROWID;
        """

    static let insertChunkSQL =
        "INSERT INTO mirror_chunks (run, map, fkey, frid, count, entries) VALUES (?, ?, ?, ?, ?, ?)"
    static let readLevelSQL = "SELECT entries FROM mirror_chunks WHERE run = ?1 AND map = ?2 ORDER BY fkey, frid"

    static func chunkLimit(pageSize: Int) -> Int { pageSize >= 16384 ? 3900 : pageSize >= 4096 ? 880 : 150 }

    init(store: LocalStore) {
        self.store = store
        chunkLimit = Self.chunkLimit(pageSize: (try? store.integer("PRAGMA page_size")) ?? 4096)
    }

    /// A value's key in the values map: the field's name, a NUL (no field name holds one), the value's
    /// bytes. For one field, values sort as SQLite sorts text (BINARY).
    static func valueKey(field: String, value: String) -> [UInt8] {
        Array(field.utf8) + [0] + Array(value.utf8)
    }

    static func damaged() -> OStackError {
        OStackError(.storageFailure, detail: "database: a mirror chunk is damaged")
    }

    /// `work`, with a damaged chunk reported as such and SQLite's errors as storage errors.
    func guarded<R>(_ work: () throws -> R) throws(OStackError) -> R {
        do {
            return try work()
        } catch let error as OStackError {
            throw error
        } catch is MirrorChunk.Damaged {
            throw Self.damaged()
        } catch {
            throw LocalStore.storage(error)
        }
    }

    // MARK: Levels

    /// The object's levels, oldest first.
    func levels(_ object: String) throws(OStackError) -> [Level] {
        try guarded {
            let statement = try store.prepared(
                "SELECT run, keys, vals, supersedes FROM mirror_levels WHERE object = ? ORDER BY run")
            statement.reset()
            statement.bindText(object, at: 1)
            try statement.checkBindings()
            defer { statement.reset() }
            var levels: [Level] = []
            while try statement.step() {
                // Counts beyond any real mirror (a damaged or edited row) would overflow the sizes
                // the merge policy adds up: damage, never a trap.
                let keys = statement.integer(at: 1)
                let values = statement.integer(at: 2)
                guard (0...Self.largestCount).contains(keys), (0...Self.largestCount).contains(values) else {
                    throw MirrorChunk.Damaged()
                }
                levels.append(
                    Level(
                        run: statement.integer(at: 0), keys: Int(keys), values: Int(values),
                        supersedes: statement.integer(at: 3) != 0))
            }
            return levels
        }
    }

    /// Objects with entries in the maps, other than `object`.
    func hasOtherObjects(than object: String) throws(OStackError) -> Bool {
        try store.integer(
            "SELECT EXISTS (SELECT 1 FROM mirror_levels WHERE object < ?1) OR EXISTS (SELECT 1 FROM mirror_levels WHERE object > ?1)",
            [.text(object)]) != 0
    }

    private func nextRun() throws(OStackError) -> Int64 {
        Int64(try store.integer("SELECT coalesce(max(run), 0) + 1 FROM mirror_levels"))
    }

    private func addLevel(_ object: String, run: Int64, keys: Int, values: Int, supersedes: Bool) throws(OStackError) {
        try store.run(
            "INSERT INTO mirror_levels (object, run, keys, vals, supersedes) VALUES (?, ?, ?, ?, ?)",
            [.text(object), .integer(run), .integer(Int64(keys)), .integer(Int64(values)), .integer(supersedes ? 1 : 0)])
    }

    private func count(_ object: String, run: Int64, keys: Int, values: Int) throws(OStackError) {
        try store.run(
            "UPDATE mirror_levels SET keys = keys + ?, vals = vals + ? WHERE object = ? AND run = ?",
            [.integer(Int64(keys)), .integer(Int64(values)), .text(object), .integer(run)])
    }

    private func dropLevel(_ object: String, run: Int64) throws(OStackError) {
        try store.run("DELETE FROM mirror_chunks WHERE run = ?", [.integer(run)])
        try store.run("DELETE FROM mirror_levels WHERE object = ? AND run = ?", [.text(object), .integer(run)])
    }

    /// Drops the values map of level `run`.
    func dropValues(_ object: String, run: Int64) throws(OStackError) {
        try store.run("DELETE FROM mirror_chunks WHERE run = ? AND map = 1", [.integer(run)])
        try store.run("UPDATE mirror_levels SET vals = 0 WHERE object = ? AND run = ?", [.text(object), .integer(run)])
    }

    /// Removes every level of `object` (its rows are the caller's).
    func drop(_ object: String) throws(OStackError) {
        for level in try levels(object) { try dropLevel(object, run: level.run) }
    }

    /// The oldest level, made (empty) when the object has none: where a small write puts a new key.
    private func baseRun(_ object: String) throws(OStackError) -> Int64 {
        if let oldest = try levels(object).first { return oldest.run }
        let run = try nextRun()
        try addLevel(object, run: run, keys: 0, values: 0, supersedes: false)
        return run
    }

    // MARK: Lookups

    /// The current rid of `id` and the run that holds it.
    func current(_ object: String, _ id: String) throws(OStackError) -> (rid: Int64, run: Int64)? {
        try current(object, id, in: try levels(object))
    }

    func current(_ object: String, _ id: String, in levels: [Level]) throws(OStackError) -> (rid: Int64, run: Int64)? {
        let key = Array(id.utf8)
        for level in levels.reversed() {
            if let rid = try rid(ofKey: key, run: level.run) { return (rid, level.run) }
        }
        return nil
    }

    /// `current` for many distinct ids at once: the rid and run of each one found. A level with few
    /// keys for the ids asked (an import's own small levels) is read once, in order, beside the sorted
    /// ids; a larger one is searched id by id.
    func current(_ object: String, _ ids: Set<String>, in levels: [Level]) throws(OStackError)
        -> [String: (rid: Int64, run: Int64)]
    {
        var found: [String: (rid: Int64, run: Int64)] = [:]
        var remaining = ids.map { Array($0.utf8) }.sorted { $0.lexicographicallyPrecedes($1) }
        for level in levels.reversed() where !remaining.isEmpty {
            var hits: [Int: Int64] = [:]
            let limit = wholeLevelFactor.multipliedReportingOverflow(by: remaining.count)
            if limit.overflow || level.keys <= limit.partialValue {
                hits = try rids(ofSortedKeys: remaining, run: level.run)
            } else {
                for (position, key) in remaining.enumerated() {
                    if let rid = try rid(ofKey: key, run: level.run) { hits[position] = rid }
                }
            }
            guard !hits.isEmpty else { continue }
            for (position, rid) in hits { found[String(decoding: remaining[position], as: UTF8.self)] = (rid, level.run) }
            remaining = remaining.indices.filter { hits[$0] == nil }.map { remaining[$0] }
        }
        return found
    }

    /// The rids `keys` (sorted, distinct) have in the keys map of run `run`, by position in `keys`:
    /// the run read once, in order, beside them.
    private func rids(ofSortedKeys keys: [[UInt8]], run: Int64) throws(OStackError) -> [Int: Int64] {
        try guarded {
            let cursor = try LevelCursor(
                run: run, map: Map.keys.rawValue, statement: try store.database.prepare(Self.readLevelSQL))
            defer { cursor.close() }
            var hits: [Int: Int64] = [:]
            var next = 0
            while next < keys.count && !cursor.done {
                let order = cursor.withKey { entry in keys[next].withUnsafeBytes { mirrorCompare(entry, $0) } }
                if order <= 0 { if order == 0 { hits[next] = cursor.rid }; try cursor.advance() }
                if order >= 0 { next += 1 }
            }
            return hits
        }
    }

    /// Every rid `id` has in any level, newest first (the first is current, the rest superseded).
    func allRIDs(_ object: String, _ id: String) throws(OStackError) -> [(rid: Int64, run: Int64)] {
        let key = Array(id.utf8)
        var found: [(rid: Int64, run: Int64)] = []
        for level in try levels(object).reversed() {
            if let rid = try rid(ofKey: key, run: level.run) { found.append((rid, level.run)) }
        }
        return found
    }

    /// The rid of `key` in the keys map of run `run`.
    private func rid(ofKey bytes: [UInt8], run: Int64) throws(OStackError) -> Int64? {
        try guarded { try bytes.withUnsafeBytes { key in try rid(ofKey: key, run: run) } }
    }

    private func rid(ofKey key: UnsafeRawBufferPointer, run: Int64) throws -> Int64? {
        do {
            let statement = try store.prepared(
                "SELECT entries FROM mirror_chunks WHERE run = ? AND map = 0 AND fkey <= ? ORDER BY fkey DESC, frid DESC LIMIT 1"
            )
            statement.reset()
            statement.bindInteger(run, at: 1)
            statement.bindBlob(key, at: 2)
            try statement.checkBindings()
            defer { statement.reset() }
            guard try statement.step() else { return nil }
            return try statement.withColumnBytes(at: 0) { (chunk) throws(MirrorChunk.Damaged) -> Int64? in
                var reader = MirrorChunk.Reader(chunk)
                while try reader.next() {
                    let order = reader.key.withUnsafeBytes { mirrorCompare($0, key) }
                    if order == 0 { return reader.rid }
                    if order > 0 { return nil }
                }
                return nil
            }
        }
    }

    /// The rids the values map of run `run` holds for `key` (a `valueKey`), appended to `rids`. The
    /// chunks are read backwards from the last one starting at or before the key: it holds the key's
    /// last entries, and a chunk before it can hold more only while the chunks start with the key.
    func rids(ofValue key: [UInt8], run: Int64, into rids: inout [Int64]) throws(OStackError) {
        try guarded {
            try key.withUnsafeBytes { key in
                let chunks = try store.prepared(
                    "SELECT entries FROM mirror_chunks WHERE run = ? AND map = 1 AND fkey <= ? ORDER BY fkey DESC, frid DESC"
                )
                chunks.reset()
                chunks.bindInteger(run, at: 1)
                chunks.bindBlob(key, at: 2)
                try chunks.checkBindings()
                defer { chunks.reset() }
                while try chunks.step() {
                    let startsWithKey = try chunks.withColumnBytes(at: 0) {
                        (chunk) throws(MirrorChunk.Damaged) -> Bool in
                        var reader = MirrorChunk.Reader(chunk)
                        var first = true
                        var startsWithKey = false
                        while try reader.next() {
                            let order = reader.key.withUnsafeBytes { mirrorCompare($0, key) }
                            if first { startsWithKey = order == 0 }
                            first = false
                            if order == 0 { rids.append(reader.rid) }
                            if order > 0 { break }
                        }
                        return startsWithKey
                    }
                    if !startsWithKey { break }
                }
            }
        }
    }

    /// The rids of records whose `field` is `value` in any level (current or not).
    func rids(_ object: String, field: String, value: String, levels: [Level]) throws(OStackError) -> [Int64] {
        let key = Self.valueKey(field: field, value: value)
        var rids: [Int64] = []
        for level in levels { try self.rids(ofValue: key, run: level.run, into: &rids) }
        return rids
    }

    // MARK: Small writes

    /// The chunk whose range holds `(key, rid)`: the last one starting at or before it, else the
    /// first of the map.
    private func chunk(containing key: UnsafeRawBufferPointer, rid: Int64, run: Int64, map: Map) throws
        -> (fkey: [UInt8], frid: Int64, entries: [(key: [UInt8], rid: Int64)])?
    {
        let atOrBefore = try store.prepared(
            "SELECT fkey, frid, entries FROM mirror_chunks WHERE run = ? AND map = ? AND (fkey, frid) <= (?, ?) ORDER BY fkey DESC, frid DESC LIMIT 1"
        )
        atOrBefore.reset()
        atOrBefore.bindInteger(run, at: 1)
        atOrBefore.bindInteger(map.rawValue, at: 2)
        atOrBefore.bindBlob(key, at: 3)
        atOrBefore.bindInteger(rid, at: 4)
        try atOrBefore.checkBindings()
        defer { atOrBefore.reset() }
        if try atOrBefore.step() { return try Self.chunkRow(atOrBefore) }
        let first = try store.prepared(
            "SELECT fkey, frid, entries FROM mirror_chunks WHERE run = ? AND map = ? ORDER BY fkey, frid LIMIT 1")
        first.reset()
        first.bindInteger(run, at: 1)
        first.bindInteger(map.rawValue, at: 2)
        try first.checkBindings()
        defer { first.reset() }
        if try first.step() { return try Self.chunkRow(first) }
        return nil
    }

    private static func chunkRow(_ statement: Statement) throws
        -> (fkey: [UInt8], frid: Int64, entries: [(key: [UInt8], rid: Int64)])
    {
        let fkey = statement.withColumnBytes(at: 0) { Array($0) }
        let frid = statement.integer(at: 1)
        let entries = try statement.withColumnBytes(at: 2) { (raw) throws(MirrorChunk.Damaged) in
            try MirrorChunk.decode(raw)
        }
        return (fkey, frid, entries)
    }

    /// Replaces a chunk by the chunks `entries` make (none when empty).
    private func rewrite(
        run: Int64, map: Map, old: (fkey: [UInt8], frid: Int64)?, entries: [(key: [UInt8], rid: Int64)]
    ) throws {
        if let old {
            let delete = try store.prepared(
                "DELETE FROM mirror_chunks WHERE run = ? AND map = ? AND fkey = ? AND frid = ?")
            delete.reset()
            delete.bindInteger(run, at: 1)
            delete.bindInteger(map.rawValue, at: 2)
            old.fkey.withUnsafeBytes { delete.bindBlob($0, at: 3) }
            delete.bindInteger(old.frid, at: 4)
            try delete.checkBindings()
            defer { delete.reset() }
            while try delete.step() {}
        }
        var writer = ChunkWriter(run: run, map: map.rawValue, limit: chunkLimit, insert: try store.prepared(Self.insertChunkSQL))
        for entry in entries { try entry.key.withUnsafeBytes { try writer.add($0, rid: entry.rid) } }
        try writer.flush()
    }

    /// Adds `(key, rid)` to a map of run `run`; false when no entry was added (it is there already, or
    /// a keys map's entry for the key was given this rid instead).
    @discardableResult
    func insert(_ key: [UInt8], rid: Int64, run: Int64, map: Map) throws(OStackError) -> Bool {
        try guarded {
            try key.withUnsafeBytes { raw in
                // (A key's one entry in a keys map, whatever its rid, is in the last chunk starting at
                // or before the key.)
                let position = map == .keys ? Int64.max : rid
                guard let found = try chunk(containing: raw, rid: position, run: run, map: map) else {
                    try rewrite(run: run, map: map, old: nil, entries: [(key, rid)])
                    return true
                }
                var entries = found.entries
                // A key is in the keys map of a level once: a second entry for it replaces the first
                // (the count of entries stays).
                var replaced = false
                if map == .keys,
                    let same = entries.firstIndex(where: { e in e.key.withUnsafeBytes { mirrorCompare($0, raw) == 0 } })
                {
                    if entries[same].rid == rid { return false }
                    entries.remove(at: same)
                    replaced = true
                }
                var index = 0
                while index < entries.count {
                    let order = entries[index].key.withUnsafeBytes { mirrorCompare($0, entries[index].rid, raw, rid) }
                    if order == 0 { return false }
                    if order > 0 { break }
                    index += 1
                }
                entries.insert((key, rid), at: index)
                try rewrite(run: run, map: map, old: (found.fkey, found.frid), entries: entries)
                return !replaced
            }
        }
    }

    /// Removes `(key, rid)` from a map of run `run` (`rid` nil: the key's entry, whatever its rid);
    /// the rid removed, nil when there was none.
    @discardableResult
    func remove(_ key: [UInt8], rid: Int64?, run: Int64, map: Map) throws(OStackError) -> Int64? {
        try guarded {
            try key.withUnsafeBytes { raw in
                let position = map == .keys ? Int64.max : (rid ?? Int64.max)
                guard let found = try chunk(containing: raw, rid: position, run: run, map: map) else {
                    return nil
                }
                var entries = found.entries
                guard
                    let index = entries.firstIndex(where: { entry in
                        entry.key.withUnsafeBytes { mirrorCompare($0, raw) == 0 } && (rid == nil || entry.rid == rid)
                    })
                else { return nil }
                let removed = entries.remove(at: index).rid
                try rewrite(run: run, map: map, old: (found.fkey, found.frid), entries: entries)
                return removed
            }
        }
    }

    /// A new key in the oldest level (a small write of a record the mirror does not hold); its values
    /// go there too. Returns the run.
    @discardableResult
    func insertNew(_ object: String, id: String, rid: Int64, values: [[UInt8]]) throws(OStackError) -> Int64 {
        let run = try baseRun(object)
        try insertAt(object, id: id, rid: rid, run: run, values: values)
        return run
    }

    /// Adds a key and its values to run `run` (the key must not be in it).
    func insertAt(_ object: String, id: String, rid: Int64, run: Int64, values: [[UInt8]]) throws(OStackError) {
        let added = try insert(Array(id.utf8), rid: rid, run: run, map: .keys)
        var addedValues = 0
        for value in values where try insert(value, rid: rid, run: run, map: .values) { addedValues += 1 }
        try count(object, run: run, keys: added ? 1 : 0, values: addedValues)
    }

    /// Changes a record's values in the level holding it: `removed` out, `added` in.
    func changeValues(_ object: String, rid: Int64, run: Int64, removed: [[UInt8]], added: [[UInt8]]) throws(OStackError) {
        var delta = 0
        for value in removed where try remove(value, rid: rid, run: run, map: .values) != nil { delta -= 1 }
        for value in added where try insert(value, rid: rid, run: run, map: .values) { delta += 1 }
        if delta != 0 { try count(object, run: run, keys: 0, values: delta) }
    }

    /// Removes the key `id` from run `run` and the values of `rid` listed; the rid removed.
    @discardableResult
    func removeKey(_ object: String, id: String, run: Int64, values: [[UInt8]], rid: Int64) throws(OStackError) -> Int64? {
        let removed = try remove(Array(id.utf8), rid: nil, run: run, map: .keys)
        var valuesRemoved = 0
        for value in values where try remove(value, rid: rid, run: run, map: .values) != nil { valuesRemoved += 1 }
        if removed != nil || valuesRemoved > 0 {
            try count(object, run: run, keys: removed == nil ? 0 : -1, values: -valuesRemoved)
        }
        return removed
    }

    /// Renames a key in place (the record keeps its rid and level).
    func renameKey(_ object: String, from old: String, to new: String, rid: Int64, run: Int64) throws(OStackError) {
        try remove(Array(old.utf8), rid: nil, run: run, map: .keys)
        try insert(Array(new.utf8), rid: rid, run: run, map: .keys)
    }

    // MARK: Runs and merges

    /// Writes sorted `keys` (one entry per key) and sorted `values` as a new level of `object`;
    /// returns its run. `supersedes`: whether its keys may be in older levels (`Level.supersedes`).
    @discardableResult
    func appendLevel(_ object: String, keys: MirrorBatch, values: MirrorBatch, supersedes: Bool = true)
        throws(OStackError) -> Int64
    {
        let run = try nextRun()
        try guarded {
            let insert = try store.prepared(Self.insertChunkSQL)
            var keyWriter = ChunkWriter(run: run, map: Map.keys.rawValue, limit: chunkLimit, insert: insert)
            try keys.forEach { key, rid in try keyWriter.add(key, rid: rid) }
            try keyWriter.flush()
            var valueWriter = ChunkWriter(run: run, map: Map.values.rawValue, limit: chunkLimit, insert: insert)
            try values.forEach { key, rid in try valueWriter.add(key, rid: rid) }
            try valueWriter.flush()
        }
        try addLevel(object, run: run, keys: keys.count, values: values.count, supersedes: supersedes)
        return run
    }

    /// Cursors over one map of `levels` (oldest first), each on its own statement.
    private func cursors(_ levels: [Level], map: Map) throws -> [LevelCursor] {
        try levels.map { level in
            try LevelCursor(
                run: level.run, map: map.rawValue, statement: try store.database.prepare(Self.readLevelSQL))
        }
    }

    /// Merges `merged` (the newest levels of `object`, oldest first) into one new level: of a key's
    /// entries the newest wins, the rows the others name are deleted with their values. Returns the
    /// new level.
    @discardableResult
    func merge(_ object: String, _ merged: [Level]) throws(OStackError) -> Level {
        let run = try nextRun()
        let (keys, values, superseded) = try guarded { () throws -> (Int, Int, Set<Int64>) in
            let insert = try store.prepared(Self.insertChunkSQL)
            var superseded = Set<Int64>()
            var keyWriter = ChunkWriter(run: run, map: Map.keys.rawValue, limit: chunkLimit, insert: insert)
            let keyCursors = try cursors(merged, map: .keys)
            defer { keyCursors.forEach { $0.close() } }
            try KeyMerge(cursors: keyCursors).forEach { key, rid, losers in
                for loser in losers { superseded.insert(loser) }
                try keyWriter.add(key, rid: rid)
                return true
            }
            try keyWriter.flush()
            var valueWriter = ChunkWriter(run: run, map: Map.values.rawValue, limit: chunkLimit, insert: insert)
            let valueCursors = try cursors(merged, map: .values)
            defer { valueCursors.forEach { $0.close() } }
            var heap = CursorHeap(valueCursors, byRID: true)
            var last: [UInt8] = []
            var lastRID: Int64 = 0
            while let next = heap.top {
                let rid = next.rid
                // The same entry in two levels (not written so, but harmless) is written once.
                let repeated =
                    rid == lastRID && last.withUnsafeBytes { l in next.withKey { mirrorCompare(l, $0) == 0 } }
                if !repeated && !superseded.contains(rid) {
                    try next.withKey { try valueWriter.add($0, rid: rid) }
                    last.removeAll(keepingCapacity: true)
                    next.withKey { last.append(contentsOf: $0) }
                    lastRID = rid
                }
                try heap.advanceTop()
            }
            try valueWriter.flush()
            return (keyWriter.written, valueWriter.written, superseded)
        }
        // What the merged levels supersede in older levels, the merged one does too (nothing is older
        // than the oldest).
        let oldest = try levels(object).first?.run
        let supersedes = merged.first?.run != oldest && merged.contains { $0.supersedes }
        for level in merged { try dropLevel(object, run: level.run) }
        try addLevel(object, run: run, keys: keys, values: values, supersedes: supersedes)
        try deleteRows(superseded)
        return Level(run: run, keys: keys, values: values, supersedes: supersedes)
    }

    private func deleteRows(_ rids: some Sequence<Int64>) throws(OStackError) {
        let delete = try store.prepared("DELETE FROM records WHERE rid = ?")
        for rid in rids.sorted() {
            delete.reset()
            delete.bindInteger(rid, at: 1)
            do {
                try delete.checkBindings()
                while try delete.step() {}
            } catch {
                delete.reset()
                throw LocalStore.storage(error)
            }
            delete.reset()
        }
    }

    /// The most entries a level's map can count (2^40: far beyond any mirror, small enough that the
    /// merge policy's sums of sizes never overflow).
    static let largestCount: Int64 = 1 << 40

    /// Levels of one size tier merged at once, and the most levels an object keeps.
    static let mergeWidth = 8
    static let maxLevels = 24
    /// The largest tier whose levels are merged whether or not they supersede (below 32 768 entries).
    static let smallTier = 1

    /// A level's size tier: sizes within a factor of `mergeWidth` share one.
    static func tier(_ size: Int) -> Int {
        var tier = 0
        var bound = 4096
        while size >= bound && tier < 30 {
            bound *= mergeWidth
            tier += 1
        }
        return tier
    }

    /// Keeps an object's levels few and its superseded rows bounded (docs/decisions/0013-mirror-runs.md):
    /// - when the levels that may supersede rows (`Level.supersedes`, all but the oldest) hold at
    ///   least half of the object's entries, everything is merged: superseded rows never outnumber
    ///   the live ones for long;
    /// - the newest `mergeWidth` levels are merged when they share a size tier and all of them may
    ///   supersede, or the tier is at most `smallTier` (each change is rewritten about log₈ n times
    ///   over its life);
    /// - and when the object has more than `maxLevels` levels, the newest few that are small beside
    ///   the older ones (`overflowMerge`). Levels that supersede nothing (a first
    ///   load, records created here) are disjoint, so only their number matters: a first pull of a
    ///   million records writes its large levels once, and records created here in small batches
    ///   are merged while small.
    func compact(_ object: String) throws(OStackError) {
        while true {
            let levels = try levels(object)
            guard levels.count >= 2 else { return }
            let flagged = levels.dropFirst().filter(\.supersedes).reduce(0) { $0 + $1.size }
            let total = levels.reduce(0) { $0 + $1.size }
            if flagged > 0 && flagged * 2 >= total {
                try merge(object, levels)
                continue
            }
            let width = Self.mergeWidth
            guard levels.count >= width else { return }
            let newest = Array(levels.suffix(width))
            let tier = Self.tier(newest[0].size)
            // Levels that supersede nothing are merged by tier only while small (a first load's are
            // written once): records created here in small batches (an import queues 200 rows at a
            // time) would otherwise pile up levels that every lookup of a new id probes.
            let sameTier = newest.allSatisfy {
                ($0.supersedes || tier <= Self.smallTier) && Self.tier($0.size) == tier
            }
            if sameTier {
                try merge(object, newest)
                continue
            }
            if levels.count > Self.maxLevels {
                try merge(object, Array(levels.suffix(Self.overflowMerge(levels.map(\.size)))))
                continue
            }
            return
        }
    }

    /// How many of the newest levels to merge when an object has too many: at least two, at most
    /// `mergeWidth`, and no older level larger than all the newer ones it would join together. A few
    /// small pulls on top of a first load's large levels are merged among themselves, not into
    /// them; a pile of equal levels is merged `mergeWidth` at a time. (Merging the newest
    /// `mergeWidth` whatever their sizes rewrote three 50 000-entry levels to fold in five small ones,
    /// every few pulls into a 1 000 000-record mirror.)
    static func overflowMerge(_ sizes: [Int]) -> Int {
        guard sizes.count >= 2 else { return sizes.count }
        var count = 1
        var newer = sizes[sizes.count - 1]
        while count < Swift.min(mergeWidth, sizes.count) {
            let candidate = sizes[sizes.count - 1 - count]
            if count >= 2 && candidate > newer { break }
            newer += candidate
            count += 1
        }
        return count
    }

    /// Merges every level of `object` into one (no superseded row is left).
    func mergeAll(_ object: String) throws(OStackError) {
        let levels = try levels(object)
        if levels.count > 1 { try merge(object, levels) }
    }

    // MARK: Reading whole maps

    /// Every current key of `object` in key order with its rid; `body` returns false to stop.
    func forEachCurrentKey(_ object: String, _ body: (UnsafeRawBufferPointer, Int64) throws(OStackError) -> Bool)
        throws(OStackError)
    {
        let levels = try levels(object)
        try guarded {
            let keyCursors = try cursors(levels, map: .keys)
            defer { keyCursors.forEach { $0.close() } }
            try KeyMerge(cursors: keyCursors).forEach { key, rid, _ in try body(key, rid) }
        }
    }

    /// The rows of `object` that a newer level supersedes (empty with one level).
    ///
    /// Only a level that `supersedes` can hold a key an older level holds too. When such levels are
    /// small beside the rest, their keys are looked up in the older levels; otherwise all levels'
    /// keys are merged.
    func superseded(_ object: String, levels: [Level]) throws(OStackError) -> Set<Int64> {
        guard Self.maySupersede(levels) else { return [] }
        var superseded = Set<Int64>()
        let flagged = levels.indices.dropFirst().filter { levels[$0].supersedes }
        // Counts from a damaged file can be huge (each level's up to `largestCount`): summed and
        // scaled saturating, never trapping.
        func sum(_ a: Int, _ b: Int) -> Int {
            let (total, overflow) = a.addingReportingOverflow(b)
            return overflow ? .max : total
        }
        func product(_ a: Int, _ b: Int) -> Int {
            let (total, overflow) = a.multipliedReportingOverflow(by: b)
            return overflow ? .max : total
        }
        let probes = flagged.reduce(0) { sum($0, product(levels[$1].keys, $1)) }
        let all = levels.reduce(0) { sum($0, $1.keys) }
        try guarded {
            if product(probes, 16) < all {
                for position in flagged {
                    let cursor = try LevelCursor(
                        run: levels[position].run, map: Map.keys.rawValue,
                        statement: try store.database.prepare(Self.readLevelSQL))
                    defer { cursor.close() }
                    while !cursor.done {
                        let key = cursor.keyBytes
                        for older in levels[..<position] {
                            if let rid = try rid(ofKey: key, run: older.run), rid != cursor.rid { superseded.insert(rid) }
                        }
                        try cursor.advance()
                    }
                }
                return
            }
            let keyCursors = try cursors(levels, map: .keys)
            defer { keyCursors.forEach { $0.close() } }
            try KeyMerge(cursors: keyCursors).forEach { _, _, losers in
                for loser in losers { superseded.insert(loser) }
                return true
            }
        }
        return superseded
    }

    /// Whether any row of these levels can be superseded: some level but the oldest may hold keys of
    /// older levels.
    static func maySupersede(_ levels: [Level]) -> Bool {
        levels.dropFirst().contains { $0.supersedes }
    }

    /// How many records of `object` the mirror holds.
    func count(_ object: String) throws(OStackError) -> Int {
        let levels = try levels(object)
        var keys = 0
        for level in levels {
            let (sum, overflow) = keys.addingReportingOverflow(level.keys)
            guard !overflow else { throw Self.damaged() }  // counts no mirror could hold
            keys = sum
        }
        return keys - (try superseded(object, levels: levels).count)
    }

    /// Every entry of the values map of `object` (current or not), for tests and checks.
    func allValues(_ object: String) throws(OStackError) -> [(key: [UInt8], rid: Int64)] {
        var entries: [(key: [UInt8], rid: Int64)] = []
        for level in try levels(object) {
            try guarded {
                let cursor = try LevelCursor(
                    run: level.run, map: Map.values.rawValue, statement: try store.database.prepare(Self.readLevelSQL))
                while !cursor.done {
                    entries.append((cursor.keyBytes, cursor.rid))
                    try cursor.advance()
                }
            }
        }
        return entries
    }
}
