import Glibc
import SQLCipherKit

// The building blocks of the mirror's maps (docs/decisions/0013-mirror-runs.md): entries, their
// order, the packed chunks they are stored in, and the writer and cursor that move them in order.

/// How mirror entries are ordered: key bytes as SQLite orders BLOBs (memcmp over the shorter length,
/// then the shorter first), so that a chunk's first key stored as a BLOB sorts the chunks in the
/// same order as the entries inside them.
@inline(__always)
func mirrorCompare(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
    let common = Swift.min(a.count, b.count)
    if common > 0 {
        let order = memcmp(a.baseAddress!, b.baseAddress!, common)
        if order != 0 { return order < 0 ? -1 : 1 }
    }
    return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
}

/// `(key, rid)` pairs in entry order.
@inline(__always)
func mirrorCompare(_ a: UnsafeRawBufferPointer, _ aRID: Int64, _ b: UnsafeRawBufferPointer, _ bRID: Int64) -> Int {
    let order = mirrorCompare(a, b)
    if order != 0 { return order }
    return aRID == bRID ? 0 : (aRID < bRID ? -1 : 1)
}

/// Entries collected in memory and sorted before they are written as a run. The key bytes live in
/// one buffer (no array per entry): a pull collects tens of thousands per transaction.
struct MirrorBatch {
    struct Item {
        var offset: Int
        var length: Int
        var rid: Int64
    }

    private(set) var bytes: [UInt8] = []
    private(set) var items: [Item] = []

    var isEmpty: Bool { items.isEmpty }
    var count: Int { items.count }

    mutating func append(_ key: UnsafeRawBufferPointer, rid: Int64) {
        items.append(Item(offset: bytes.count, length: key.count, rid: rid))
        bytes.append(contentsOf: key)
    }

    mutating func append(_ key: [UInt8], rid: Int64) {
        key.withUnsafeBytes { append($0, rid: rid) }
    }

    /// An indexed value's key: the field's name, a NUL, then the value's bytes (`MirrorIndex.valueKey`).
    mutating func appendValue(field: [UInt8], value: UnsafeRawBufferPointer, rid: Int64) {
        items.append(Item(offset: bytes.count, length: field.count + 1 + value.count, rid: rid))
        bytes.append(contentsOf: field)
        bytes.append(0)
        bytes.append(contentsOf: value)
    }

    /// Sorts the entries into entry order.
    mutating func sort() {
        var sorted = items
        bytes.withUnsafeBytes { base in
            sorted.sort { a, b in
                mirrorCompare(
                    UnsafeRawBufferPointer(rebasing: base[a.offset..<a.offset + a.length]), a.rid,
                    UnsafeRawBufferPointer(rebasing: base[b.offset..<b.offset + b.length]), b.rid) < 0
            }
        }
        items = sorted
    }

    /// Keeps only the items `keep` accepts (in order).
    mutating func filter(_ keep: (Item) -> Bool) {
        items = items.filter(keep)
    }

    func withKey<R>(_ item: Item, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try bytes.withUnsafeBytes { base in
            try body(UnsafeRawBufferPointer(rebasing: base[item.offset..<item.offset + item.length]))
        }
    }

    /// Calls `body` with every entry in order, the key bytes valid inside the call only.
    func forEach(_ body: (UnsafeRawBufferPointer, Int64) throws -> Void) rethrows {
        try bytes.withUnsafeBytes { base in
            for item in items {
                try body(UnsafeRawBufferPointer(rebasing: base[item.offset..<item.offset + item.length]), item.rid)
            }
        }
    }
}

/// The packed form of a chunk's entries: each is `varint(key length) key varint(rid)` (LEB128),
/// in entry order. Decoding checks every length against the chunk: a damaged chunk is an error,
/// never a read outside it.
enum MirrorChunk {
    struct Damaged: Error {}

    static func append(key: UnsafeRawBufferPointer, rid: Int64, to buffer: inout [UInt8]) {
        appendVarint(UInt64(key.count), to: &buffer)
        buffer.append(contentsOf: key)
        appendVarint(UInt64(bitPattern: rid), to: &buffer)
    }

    static func encodedSize(keyLength: Int, rid: Int64) -> Int {
        varintSize(UInt64(keyLength)) + keyLength + varintSize(UInt64(bitPattern: rid))
    }

    static func appendVarint(_ value: UInt64, to buffer: inout [UInt8]) {
        var value = value
        while value >= 0x80 {
            buffer.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        buffer.append(UInt8(value))
    }

    static func varintSize(_ value: UInt64) -> Int {
        var value = value
        var size = 1
        while value >= 0x80 {
            value >>= 7
            size += 1
        }
        return size
    }

    /// The varint at `position`, moving past it.
    @inline(__always)
    static func readVarint(_ chunk: UnsafeRawBufferPointer, _ position: inout Int) throws(Damaged) -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard position < chunk.count, shift < 64 else { throw Damaged() }
            let byte = chunk[position]
            position += 1
            value |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return value }
            shift += 7
        }
    }

    /// The entry at `position` (its key's range in `chunk`, its rid), moving past it.
    @inline(__always)
    static func entry(_ chunk: UnsafeRawBufferPointer, _ position: inout Int) throws(Damaged) -> (Range<Int>, Int64) {
        let length = try readVarint(chunk, &position)
        guard length <= UInt64(chunk.count - position) else { throw Damaged() }
        let key = position..<position + Int(length)
        position += Int(length)
        let rid = Int64(bitPattern: try readVarint(chunk, &position))
        guard rid > 0 else { throw Damaged() }
        return (key, rid)
    }

    /// Every entry of a chunk, copied.
    static func decode(_ chunk: UnsafeRawBufferPointer) throws(Damaged) -> [(key: [UInt8], rid: Int64)] {
        var entries: [(key: [UInt8], rid: Int64)] = []
        var position = 0
        while position < chunk.count {
            let (key, rid) = try entry(chunk, &position)
            entries.append((Array(UnsafeRawBufferPointer(rebasing: chunk[key])), rid))
        }
        return entries
    }
}

/// Writes entries, in order, as chunks of one map of one run: each chunk holds as many entries as fit
/// in `limit` bytes, so that a chunk row stays on its B-tree page (no overflow page to read). The
/// order is checked: entries out of order would make every lookup in the run unreliable.
struct ChunkWriter {
    let run: Int64
    let map: Int64
    let limit: Int
    private let insert: Statement
    private var buffer: [UInt8] = []
    private var firstKey: [UInt8] = []
    private var firstRID: Int64 = 0
    private var count = 0
    private var lastKey: [UInt8] = []
    private var lastRID: Int64 = 0
    /// Entries written so far.
    private(set) var written = 0

    /// `insert`: `INSERT INTO mirror_chunks (run, map, fkey, frid, count, entries) VALUES (?, ?, ?, ?, ?, ?)`.
    init(run: Int64, map: Int64, limit: Int, insert: Statement) {
        self.run = run
        self.map = map
        self.limit = limit
        self.insert = insert
        buffer.reserveCapacity(limit + 64)
    }

    mutating func add(_ key: UnsafeRawBufferPointer, rid: Int64) throws {
        if written > 0 {
            let order = lastKey.withUnsafeBytes { mirrorCompare($0, lastRID, key, rid) }
            guard order < 0 else { throw MirrorChunk.Damaged() }
        }
        let size = MirrorChunk.encodedSize(keyLength: key.count, rid: rid)
        if count > 0 && buffer.count + size > limit { try flush() }
        if count == 0 {
            firstKey.removeAll(keepingCapacity: true)
            firstKey.append(contentsOf: key)
            firstRID = rid
        }
        MirrorChunk.append(key: key, rid: rid, to: &buffer)
        count += 1
        written += 1
        lastKey.removeAll(keepingCapacity: true)
        lastKey.append(contentsOf: key)
        lastRID = rid
    }

    /// Writes the chunk being filled (call once after the last `add`).
    mutating func flush() throws {
        guard count > 0 else { return }
        insert.reset()
        insert.bindInteger(run, at: 1)
        insert.bindInteger(map, at: 2)
        firstKey.withUnsafeBytes { insert.bindBlob($0, at: 3) }
        insert.bindInteger(firstRID, at: 4)
        insert.bindInteger(Int64(count), at: 5)
        buffer.withUnsafeBytes { insert.bindBlob($0, at: 6) }
        try insert.checkBindings()
        defer { insert.reset() }
        while try insert.step() {}
        buffer.removeAll(keepingCapacity: true)
        count = 0
    }
}

/// Reads one map of one run in entry order, a chunk at a time, on a statement of its own (several
/// cursors are open at once in a merge).
final class LevelCursor {
    let run: Int64
    private let statement: Statement
    private var chunk: [UInt8] = []
    private var position = 0
    private(set) var key: Range<Int> = 0..<0
    private(set) var rid: Int64 = 0
    private(set) var done = false

    /// `statement`: `SELECT entries FROM mirror_chunks WHERE run = ?1 AND map = ?2 ORDER BY fkey, frid`,
    /// prepared for this cursor alone.
    init(run: Int64, map: Int64, statement: Statement) throws {
        self.run = run
        self.statement = statement
        try statement.bind([.integer(run), .integer(map)])
        try advance()
    }

    /// Moves to the next entry; `done` when there is none.
    func advance() throws {
        while position >= chunk.count {
            guard try statement.step() else {
                done = true
                statement.reset()
                return
            }
            chunk = statement.withColumnBytes(at: 0) { Array($0) }
            position = 0
        }
        var position = self.position
        var found: (Range<Int>, Int64)?
        try chunk.withUnsafeBytes { raw in found = try MirrorChunk.entry(raw, &position) }
        self.position = position
        if let found { (key, rid) = found }
    }

    func withKey<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try chunk.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[key])) }
    }

    var keyBytes: [UInt8] { chunk.withUnsafeBytes { Array($0[key]) } }

    func close() { statement.reset() }
}

/// Cursors over several runs merged in entry order by a binary heap (about log₂ k comparisons an
/// entry). Of equal entries, the one of the newest run comes first.
struct CursorHeap {
    private var heap: [LevelCursor]
    /// Compare rids too (values maps: an entry is its key and rid) or keys alone (keys maps).
    private let byRID: Bool

    init(_ cursors: [LevelCursor], byRID: Bool) {
        heap = cursors.filter { !$0.done }
        self.byRID = byRID
        var index = heap.count / 2
        while index > 0 {
            index -= 1
            siftDown(index)
        }
    }

    var top: LevelCursor? { heap.first }

    private func before(_ a: LevelCursor, _ b: LevelCursor) -> Bool {
        let order = a.withKey { x in b.withKey { y in mirrorCompare(x, y) } }
        if order != 0 { return order < 0 }
        if byRID && a.rid != b.rid { return a.rid < b.rid }
        return a.run > b.run
    }

    /// Moves the top cursor to its next entry and restores the order (a finished cursor leaves).
    mutating func advanceTop() throws {
        try heap[0].advance()
        if heap[0].done {
            heap.swapAt(0, heap.count - 1)
            heap.removeLast()
        }
        if !heap.isEmpty { siftDown(0) }
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var first = parent
            if left < heap.count && before(heap[left], heap[first]) { first = left }
            if right < heap.count && before(heap[right], heap[first]) { first = right }
            if first == parent { return }
            heap.swapAt(parent, first)
            parent = first
        }
    }
}

/// The keys maps of several runs merged in key order: for each key, the entry of the newest run
/// holding it wins; the others are superseded.
struct KeyMerge {
    let cursors: [LevelCursor]

    /// Calls `body(key, winner rid, superseded rids)` for every key in order; `body` returns false to
    /// stop.
    func forEach(_ body: (UnsafeRawBufferPointer, Int64, [Int64]) throws -> Bool) throws {
        var heap = CursorHeap(cursors, byRID: false)
        var key: [UInt8] = []
        var losers: [Int64] = []
        while let winner = heap.top {
            let rid = winner.rid
            key.removeAll(keepingCapacity: true)
            winner.withKey { key.append(contentsOf: $0) }
            try heap.advanceTop()
            losers.removeAll(keepingCapacity: true)
            while let next = heap.top, key.withUnsafeBytes({ k in next.withKey { mirrorCompare(k, $0) == 0 } }) {
                if next.rid != rid { losers.append(next.rid) }
                try heap.advanceTop()
            }
            let going = try key.withUnsafeBytes { try body($0, rid, losers) }
            if !going { return }
        }
    }
}
