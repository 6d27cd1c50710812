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
        var rid: Int64
        /// The key's first eight bytes as a big-endian integer (zero-padded): it decides most
        /// comparisons of the sort without touching the bytes again.
        var prefix: UInt64
        var length: UInt32
    }

    private(set) var bytes: [UInt8] = []
    private(set) var items: [Item] = []

    var isEmpty: Bool { items.isEmpty }
    var count: Int { items.count }

    mutating func append(_ key: UnsafeRawBufferPointer, rid: Int64) {
        items.append(Item(offset: bytes.count, rid: rid, prefix: Self.prefix(key), length: UInt32(key.count)))
        bytes.append(contentsOf: key)
    }

    mutating func append(_ key: [UInt8], rid: Int64) {
        key.withUnsafeBytes { append($0, rid: rid) }
    }

    /// An indexed value's key: the field's name, a NUL, then the value's bytes (`MirrorIndex.valueKey`).
    mutating func appendValue(field: [UInt8], value: UnsafeRawBufferPointer, rid: Int64) {
        let offset = bytes.count
        bytes.append(contentsOf: field)
        bytes.append(0)
        bytes.append(contentsOf: value)
        let prefix = bytes.withUnsafeBytes { Self.prefix(UnsafeRawBufferPointer(rebasing: $0[offset...])) }
        items.append(Item(offset: offset, rid: rid, prefix: prefix, length: UInt32(bytes.count - offset)))
    }

    static func prefix(_ key: UnsafeRawBufferPointer) -> UInt64 {
        var prefix: UInt64 = 0
        let length = Swift.min(key.count, 8)
        for position in 0..<length { prefix = prefix << 8 | UInt64(key[position]) }
        return prefix << UInt64(8 * (8 - length))
    }

    /// Sorts the entries into entry order, in place (no second copy of the entries: a pull's batch
    /// is sorted while the transaction's other memory is held).
    mutating func sort() {
        guard items.count > 1 else { return }
        bytes.withUnsafeBytes { base in
            items.sort { a, b in
                if a.prefix != b.prefix { return a.prefix < b.prefix }
                return mirrorCompare(
                    UnsafeRawBufferPointer(rebasing: base[a.offset..<a.offset + Int(a.length)]), a.rid,
                    UnsafeRawBufferPointer(rebasing: base[b.offset..<b.offset + Int(b.length)]), b.rid) < 0
            }
        }
    }

    /// Keeps only the items `keep` accepts (in order).
    mutating func filter(_ keep: (Item) -> Bool) {
        items = items.filter(keep)
    }

    func withKey<R>(_ item: Item, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try bytes.withUnsafeBytes { base in
            try body(UnsafeRawBufferPointer(rebasing: base[item.offset..<item.offset + Int(item.length)]))
        }
    }

    /// Calls `body` with every entry in order, the key bytes valid inside the call only.
    func forEach(_ body: (UnsafeRawBufferPointer, Int64) throws -> Void) rethrows {
        try bytes.withUnsafeBytes { base in
            for item in items {
                try body(UnsafeRawBufferPointer(rebasing: base[item.offset..<item.offset + Int(item.length)]), item.rid)
            }
        }
    }
}

/// The packed form of a chunk's entries, in entry order, front-coded: each is `varint(shared)
/// varint(length) suffix varint(rid)` (LEB128), its key being the first `shared` bytes of the key
/// before it in the chunk followed by the `length` bytes of `suffix` (ids of one object often share
/// a prefix, values of one field always share the field's name). Decoding checks every length
/// against the chunk: a damaged chunk is an error, never a read outside it.
enum MirrorChunk {
    struct Damaged: Error {}

    /// Appends an entry after one whose key is `previous` (empty for a chunk's first entry).
    static func append(
        key: UnsafeRawBufferPointer, rid: Int64, after previous: UnsafeRawBufferPointer, to buffer: inout [UInt8]
    ) {
        let shared = sharedPrefix(key, previous)
        appendVarint(UInt64(shared), to: &buffer)
        appendVarint(UInt64(key.count - shared), to: &buffer)
        buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: key[shared...]))
        appendVarint(UInt64(bitPattern: rid), to: &buffer)
    }

    static func encodedSize(key: UnsafeRawBufferPointer, rid: Int64, after previous: UnsafeRawBufferPointer) -> Int {
        let shared = sharedPrefix(key, previous)
        return varintSize(UInt64(shared)) + varintSize(UInt64(key.count - shared)) + key.count - shared
            + varintSize(UInt64(bitPattern: rid))
    }

    static func sharedPrefix(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
        let limit = Swift.min(a.count, b.count)
        var shared = 0
        while shared < limit && a[shared] == b[shared] { shared += 1 }
        return shared
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

    /// Steps through a chunk's entries, rebuilding each key in `key` (a buffer it reuses).
    struct Reader {
        let chunk: UnsafeRawBufferPointer
        private(set) var position = 0
        private(set) var key: [UInt8] = []
        private(set) var rid: Int64 = 0

        init(_ chunk: UnsafeRawBufferPointer) { self.chunk = chunk }

        init(_ chunk: UnsafeRawBufferPointer, reusing buffer: [UInt8]) {
            self.chunk = chunk
            key = buffer
            key.removeAll(keepingCapacity: true)
        }

        /// Moves to the next entry: false after the last.
        @inline(__always)
        mutating func next() throws(Damaged) -> Bool {
            guard position < chunk.count else { return false }
            let shared = try MirrorChunk.readVarint(chunk, &position)
            guard shared <= UInt64(key.count) else { throw Damaged() }
            let length = try MirrorChunk.readVarint(chunk, &position)
            guard length <= UInt64(chunk.count - position) else { throw Damaged() }
            key.removeLast(key.count - Int(shared))
            key.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[position..<position + Int(length)]))
            position += Int(length)
            rid = Int64(bitPattern: try MirrorChunk.readVarint(chunk, &position))
            guard rid > 0 else { throw Damaged() }
            return true
        }

        /// The buffer, to reuse for another chunk.
        var buffer: [UInt8] { key }
    }

    /// Every entry of a chunk, copied.
    static func decode(_ chunk: UnsafeRawBufferPointer) throws(Damaged) -> [(key: [UInt8], rid: Int64)] {
        var entries: [(key: [UInt8], rid: Int64)] = []
        var reader = Reader(chunk)
        while try reader.next() { entries.append((reader.key, reader.rid)) }
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
        if count > 0 {
            let size = lastKey.withUnsafeBytes { MirrorChunk.encodedSize(key: key, rid: rid, after: $0) }
            if buffer.count + size > limit { try flush() }
        }
        if count == 0 {
            firstKey.removeAll(keepingCapacity: true)
            firstKey.append(contentsOf: key)
            firstRID = rid
            MirrorChunk.append(key: key, rid: rid, after: UnsafeRawBufferPointer(start: nil, count: 0), to: &buffer)
        } else {
            lastKey.withUnsafeBytes { MirrorChunk.append(key: key, rid: rid, after: $0, to: &buffer) }
        }
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
    /// The current entry's key (rebuilt from the front-coded chunk).
    private var key: [UInt8] = []
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
            chunk.removeAll(keepingCapacity: true)
            statement.withColumnBytes(at: 0) { chunk.append(contentsOf: $0) }
            position = 0
            key.removeAll(keepingCapacity: true)
        }
        // One entry, decoded in place.
        try chunk.withUnsafeBytes { raw in
            var position = self.position
            let shared = try MirrorChunk.readVarint(raw, &position)
            guard shared <= UInt64(key.count) else { throw MirrorChunk.Damaged() }
            let length = try MirrorChunk.readVarint(raw, &position)
            guard length <= UInt64(raw.count - position) else { throw MirrorChunk.Damaged() }
            key.removeLast(key.count - Int(shared))
            key.append(contentsOf: UnsafeRawBufferPointer(rebasing: raw[position..<position + Int(length)]))
            position += Int(length)
            let rid = Int64(bitPattern: try MirrorChunk.readVarint(raw, &position))
            guard rid > 0 else { throw MirrorChunk.Damaged() }
            self.rid = rid
            self.position = position
        }
    }

    func withKey<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try key.withUnsafeBytes { try body($0) }
    }

    var keyBytes: [UInt8] { key }

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
