import Dispatch
import Glibc
import FoundationEssentials
import PlatformKit
import SQLCipherKit
import SodiumKit
import Synchronization

/// One audit event, as recorded (docs/audit.md; docs/security.md#aud-2). `details` holds only values ostack chose or
/// allowlisted (object names, counts, hosts, backend names) — never secrets, record content or
/// server text.
public struct AuditEntry: Sendable, Equatable, Codable {
    public var seq: Int
    public var time: String
    public var event: String
    public var outcome: String
    public var details: [String: String]
}

/// Events that happen outside the account database (sign-in, refresh, lock, unlock, PIN, …) are first
/// appended to a per-account buffer file (`audit-pending.jsonl`, 0600, non-secret fields only): the
/// database — and the audit key derived from its key — may be locked when they happen (a failed
/// unlock, a PIN lockout). The next time the database is opened with its key, buffered events are
/// moved into the chained trail in one transaction, in order, with their original times.
///
/// Each line carries a MAC (keyed BLAKE2b over the account id and its fields) under the buffer key,
/// derived from the global audit key the keyring holds (docs/security.md#aud-6), so a line written
/// into the file by anyone without the keyring is not chained: it is dropped and reported
/// (`audit.buffer-rejected`, with the count). The file and its directory are never followed
/// through a symbolic link (docs/security.md#fs-2).
public struct AuditBuffer: Sendable {
    public let path: String
    let accountID: String
    /// Where the buffer key comes from (nil: lines are written without a MAC — and rejected later).
    let signer: GlobalAuditTrail?

    /// Serialises appends and flushes across processes (`locks/audit-buffer-<dir>.lock`): a flush
    /// reads the renamed file, chains it and removes it while no other process appends to it or
    /// flushes it.
    let lockPath: String

    public init(layout: FileLayout, account: Account, signer: GlobalAuditTrail? = nil) {
        path = layout.accountDirectory(account.dataDirectory) + "/audit-pending.jsonl"
        lockPath = layout.locksDirectory + "/audit-buffer-\(account.dataDirectory).lock"
        accountID = account.id.rawValue
        self.signer = signer
    }

    struct Line: Codable {
        var id: String
        var time: String
        var event: String
        var outcome: String
        var details: [String: String]
        /// Hex of the line's MAC under the buffer key.
        var mac: String?
    }

    /// The MAC of a line: length-prefixed label, account id, id, time, event, outcome and details.
    func mac(_ line: Line, key: SecretBytes) -> [UInt8]? {
        var message: [UInt8] = []
        for field in [
            "ostack/audit-buffer/v1", accountID, line.id, line.time, line.event, line.outcome,
            AuditTrail.encode(line.details),
        ] {
            let bytes = Array(field.utf8)
            message += withUnsafeBytes(of: UInt32(bytes.count).bigEndian) { Array($0) } + bytes
        }
        return try? BLAKE2b.mac(key: key, message: message)
    }

    /// Appends one event (best effort: auditing never stops the command it records).
    /// `key`: the buffer key when the caller already holds it (read while Argon2id ran during an
    /// unlock), so that this append makes no keyring call; else it is read (and made if missing).
    public func append(
        _ event: String, outcome: String = "ok", details: [String: String] = [:], now: Date = Date(),
        key given: SecretBytes? = nil
    ) {
        var line = Line(
            id: String(Int64(now.timeIntervalSince1970 * 1_000_000)) + "-" + String(SecureRandom.uniform(1_000_000)),
            time: AuditTrail.timestamp(now), event: event, outcome: outcome, details: details)
        let directory = SecureFileSystem.parentDirectory(of: path)
        guard SecureFileSystem.isDirectory(directory, followLinks: false) else { return }
        if let key = given ?? (try? signer?.bufferKey(create: true)) { line.mac = mac(line, key: key).map(Hex.encode) }
        guard let data = try? JSONEncoder().encode(line) else { return }
        // Under the buffer's lock when it comes within half a second (best effort: never holds up
        // the command for long; a flush holds the lock while its transaction waits for the database).
        let lock = try? FileLock(path: lockPath, timeout: 0.5)
        defer { withExtendedLifetime(lock) {} }
        try? SecureFileSystem.appendLine(Array(data), to: path)
    }

    /// The buffer's lock for a flush, waited for up to 3 s: `.success(nil)` when there is no lock
    /// file to take (the flush goes on, as it would alone), a failure when another process holds it
    /// all that time (the flush is left for a later open).
    func lockForFlush() -> Result<FileLock?, PlatformError> {
        try? SecureFileSystem.createDirectory(SecureFileSystem.parentDirectory(of: lockPath))
        do {
            return .success(try FileLock(path: lockPath, timeout: 3))
        } catch let error where error.operation == .lock {
            return .failure(error)
        } catch {
            return .success(nil)
        }
    }

    var flushingPath: String { path + ".flushing" }

    /// Takes the buffered lines for flushing: the file is first renamed away (atomically), so lines
    /// appended meanwhile go to a new file and are never deleted unread. A renamed file left by a
    /// crash is taken first; lines already in the chain are skipped by id.
    /// `unreadable`: lines that are not a buffered event at all (counted with the forged ones, never
    /// dropped unseen).
    func take() -> (lines: [Line], unreadable: Int) {
        if !SecureFileSystem.exists(flushingPath) {
            guard rename(path, flushingPath) == 0 else { return ([], 0) }
        }
        guard let bytes = try? SecureFileSystem.readFile(flushingPath) else { return ([], 0) }
        var lines: [Line] = []
        var unreadable = 0
        for raw in bytes.split(separator: UInt8(ascii: "\n")) {
            if let line = try? JSONDecoder().decode(Line.self, from: Data(raw)) {
                lines.append(line)
            } else {
                unreadable += 1
            }
        }
        return (lines, unreadable)
    }

    /// Splits taken lines into those whose MAC verifies under `key` and the count of the others.
    func authenticated(_ lines: [Line], key: SecretBytes?) -> (lines: [Line], rejected: Int) {
        var good: [Line] = []
        for line in lines {
            guard let key, let stored = line.mac.flatMap(Hex.decode), let expected = mac(line, key: key),
                BLAKE2b.constantTimeEqual(expected, stored)
            else { continue }
            good.append(line)
        }
        return (good, lines.count - good.count)
    }

    func clear() { try? SecureFileSystem.removeFile(flushingPath) }
}

/// Where anchor writes run. A command's last database work (the close, whose checkpoint writes what
/// the command committed into the file) need not wait for the keyring's round trips: once
/// `deferUntilSettled()` is called (by the ostack executable, before any command), anchors are
/// written in order on a queue of their own, and `settle()` waits for them — at `exit`, whichever
/// path calls it (an `atexit` handler), and before this process reads or erases an anchor. An anchor lost to a crash or an interrupt is
/// stale, which `audit verify` accepts when the chain extends it (docs/audit.md).
public enum AnchorWrites {
    private static let queue = DispatchQueue(label: "ostack.audit.anchor")
    private static let deferred = Mutex(false)

    /// Anchor writes from now on run on the queue; `exit` waits for them.
    public static func deferUntilSettled() {
        let first = deferred.withLock { deferred in
            defer { deferred = true }
            return !deferred
        }
        if first { atexit { AnchorWrites.settle() } }
    }

    /// Waits until every anchor write asked for so far is done.
    public static func settle() { queue.sync {} }

    static func run(_ write: @escaping @Sendable () -> Void) {
        if deferred.withLock({ $0 }) { queue.async(execute: write) } else { write() }
    }
}

/// The per-account audit trail (docs/audit.md; docs/security.md#aud-1 … #aud-3): an append-only table in the account's
/// SQLCipher database, each entry MAC'd with keyed BLAKE2b under `K_audit` (derived from the DEK)
/// over its fields and the previous MAC, the first over a random genesis value; the head
/// `{seq, mac}` is anchored in the keyring (`audit-anchor`) so truncation and an older copy of the
/// files are detected.
public struct AuditTrail: Sendable {
    public let store: LocalStore
    let key: SecretBytes
    let anchorKey: SecretKey
    let secrets: any SecretStore

    public static let schema = """
        CREATE TABLE audit (
            seq INTEGER PRIMARY KEY, time TEXT NOT NULL, event TEXT NOT NULL, outcome TEXT NOT NULL,
            details TEXT NOT NULL, mac BLOB NOT NULL)
        """

    public init(store: LocalStore, databaseKey: AccountDataKey, anchorKey: SecretKey, secrets: any SecretStore)
        throws(OStackError)
    {
        self.store = store
        do {
            key = try SubkeyDerivation.derive(from: databaseKey.bytes, id: 1, context: "auditlog")
        } catch {
            throw OStackError(.internal, detail: "audit key derivation")
        }
        self.anchorKey = anchorKey
        self.secrets = secrets
    }

    /// UTC ISO 8601 with milliseconds ("2026-11-23T01:46:44.305Z").
    static func timestamp(_ date: Date) -> String {
        Timestamp.iso8601(secondsSince1970: date.timeIntervalSince1970, milliseconds: true)
    }

    // MARK: Appending

    /// Appends events inside the caller's transaction (or its own).
    public func append(_ event: String, outcome: String = "ok", details: [String: String] = [:], time: String? = nil)
        throws(OStackError)
    {
        try store.transaction { () throws(OStackError) in
            let head = try head()
            let entry = AuditEntry(
                seq: head.seq + 1, time: time ?? Self.timestamp(store.clock.now()), event: event, outcome: outcome,
                details: details)
            let mac = try self.mac(entry, previous: head.mac)
            try store.run(
                "INSERT INTO audit (seq, time, event, outcome, details, mac) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    .integer(Int64(entry.seq)), .text(entry.time), .text(entry.event), .text(entry.outcome),
                    .text(Self.encode(details)), .blob(mac),
                ])
        }
    }

    /// Moves buffered events into the trail (once each: the last moved id is kept in the same
    /// transaction), then anchors the head.
    /// Lines whose MAC does not verify under the buffer key (docs/security.md#aud-6) are not chained;
    /// their number is recorded as `audit.buffer-rejected` (outcome `failed`). When the buffer key
    /// cannot be read (a locked keyring), the buffer is left for a later open.
    public func flush(_ buffer: AuditBuffer) throws(OStackError) {
        guard SecureFileSystem.exists(buffer.path) || SecureFileSystem.exists(buffer.flushingPath) else { return }
        let bufferKey: SecretBytes?
        do {
            bufferKey = try buffer.signer?.bufferKey(create: false)
        } catch {
            return
        }
        // One flush at a time, and no append into the file while it is read and removed: two
        // processes flushing at once could chain the same lines twice, or remove a file the other
        // had just taken.
        guard case .success(let lock) = buffer.lockForFlush() else { return }
        defer { withExtendedLifetime(lock) {} }
        let (taken, unreadable) = buffer.take()
        guard !taken.isEmpty || unreadable > 0 else {
            buffer.clear()
            return
        }
        let (lines, _) = buffer.authenticated(taken, key: bufferKey)
        try store.transaction { () throws(OStackError) in
            let done = try store.value("audit.flushed-through")
            var skipping = done != nil && taken.contains { $0.id == done }
            var rejected = unreadable
            var seen: Set<String> = []
            for line in taken {
                if skipping {
                    if line.id == done { skipping = false }
                    continue
                }
                // Forged, or a copy of a line already taken: not chained, counted.
                guard lines.contains(where: { $0.id == line.id && $0.mac == line.mac }), seen.insert(line.id).inserted
                else {
                    rejected += 1
                    continue
                }
                try append(line.event, outcome: line.outcome, details: line.details, time: line.time)
            }
            if rejected > 0 {
                try append("audit.buffer-rejected", outcome: "failed", details: ["count": String(rejected)])
            }
            if let last = taken.last { try store.setValue("audit.flushed-through", last.id) }
        }
        buffer.clear()
        anchor()
    }

    /// Writes the head to the keyring (best effort; `audit verify` and `doctor` report a stale anchor).
    /// The head is read here; the keyring write runs on `AnchorWrites`' queue when the process asked
    /// for that (the ostack executable does), else before returning.
    ///
    /// The anchor moves forward only along the chain it names: when the entry at the anchored
    /// sequence is not the anchored one (an older copy of the files was put back and written to
    /// since), it stays where it is, so that `verify` reports `rolled-back`. Moving it to the new head
    /// made the fork verify as intact after the first write.
    public func anchor() {
        guard let head = try? head(), head.seq > 0 else { return }
        // The MACs of the newest entries, for the check above (read here: the keyring write runs on
        // another thread). A fork is caught when its head first passes the anchored sequence, which
        // is then among the newest few (one command appends a handful of events), so a short window
        // does; an anchor further behind — a keyring that refused writes for that long — is moved
        // without the check. (Every write command anchors: this read stays small.)
        guard
            let recent = try? store.rows(
                "SELECT seq, mac FROM audit WHERE seq > ? ORDER BY seq", [.integer(Int64(head.seq - Self.anchorWindow))]
            )
        else { return }
        var macs: [Int: [UInt8]] = [:]
        for row in recent { if case .blob(let mac) = row["mac"] { macs[Int(row.int("seq") ?? 0)] = mac } }
        let chain = macs
        let secrets = self.secrets
        let anchorKey = self.anchorKey
        AnchorWrites.run {
            if let stored = try? secrets.read(anchorKey) {
                let parts = stored.withUnsafeBytes({ String(decoding: $0, as: UTF8.self) }).split(separator: ":")
                if let seq = parts.first.flatMap({ Int($0) }) {
                    // Never backwards (another process may have anchored a later head).
                    if seq >= head.seq { return }
                    // Never off the chain it names.
                    if parts.count == 2, let mac = Hex.decode(String(parts[1])), let ours = chain[seq],
                        !BLAKE2b.constantTimeEqual(ours, mac)
                    {
                        return
                    }
                }
            }
            let text = "\(head.seq):" + Hex.encode(head.mac)
            try? secrets.write(SecretBytes(copying: Array(text.utf8)), for: anchorKey)
        }
    }

    /// How many of the newest entries `anchor` checks the stored anchor against.
    static let anchorWindow = 256

    func head() throws(OStackError) -> (seq: Int, mac: [UInt8]) {
        if let row = try store.rows("SELECT seq, mac FROM audit ORDER BY seq DESC LIMIT 1").first,
            case .blob(let mac) = row["mac"]
        {
            return (Int(row.int("seq") ?? 0), mac)
        }
        return (0, try genesis())
    }

    /// The random per-account start of the chain (`mac_0`, docs/audit.md).
    func genesis() throws(OStackError) -> [UInt8] {
        if let hex = try store.value("audit.genesis"), let bytes = Hex.decode(hex) { return bytes }
        let bytes = SecureRandom.bytes(32)
        try store.setValue("audit.genesis", Hex.encode(bytes))
        return bytes
    }

    func mac(_ entry: AuditEntry, previous: [UInt8]) throws(OStackError) -> [UInt8] {
        try Self.mac(entry, previous: previous, key: key)
    }

    /// `mac_i = BLAKE2b_K(len‖seq ‖ len‖time ‖ len‖event ‖ len‖outcome ‖ len‖details ‖ mac_{i-1})`, for
    /// the account trails and the global one alike.
    static func mac(_ entry: AuditEntry, previous: [UInt8], key: SecretBytes) throws(OStackError) -> [UInt8] {
        var message: [UInt8] = []
        for field in [String(entry.seq), entry.time, entry.event, entry.outcome, encode(entry.details)] {
            let bytes = Array(field.utf8)
            message += withUnsafeBytes(of: UInt32(bytes.count).bigEndian) { Array($0) } + bytes
        }
        message += previous
        do {
            return try BLAKE2b.mac(key: key, message: message)
        } catch {
            throw OStackError(.internal, detail: "audit mac")
        }
    }

    static func encode(_ details: [String: String]) -> String {
        String(decoding: JSONValue.object(details.mapValues { .string($0) }).serialized(), as: UTF8.self)
    }

    // MARK: Reading and verifying

    public func entries(since: String? = nil, event: String? = nil, limit: Int? = nil) throws(OStackError)
        -> [AuditEntry]
    {
        var sql = "SELECT seq, time, event, outcome, details FROM audit WHERE 1"
        var bindings: [SQLValue] = []
        if let since {
            sql += " AND time >= ?"
            bindings.append(.text(since))
        }
        if let event {
            sql += " AND (event = ? OR event LIKE ?)"
            bindings += [.text(event), .text(event + ".%")]
        }
        sql += " ORDER BY seq DESC"
        if let limit { sql += " LIMIT \(max(0, limit))" }
        return try store.rows(sql, bindings).reversed().map { row in
            let details =
                row.text("details").flatMap { JSONValue.parse(Array($0.utf8))?.objectValue }?.compactMapValues(
                    \.stringValue) ?? [:]
            return AuditEntry(
                seq: Int(row.int("seq") ?? 0), time: row.text("time") ?? "", event: row.text("event") ?? "",
                outcome: row.text("outcome") ?? "", details: details)
        }
    }

    public struct Verification: Sendable, Equatable {
        public var intact: Bool
        public var events: Int
        public var firstBadSeq: Int?
        /// Why it is not intact: "mac", "gap", "anchor-missing", "truncated", "rolled-back".
        public var problem: String?
    }

    /// Recomputes the chain and compares the head with the keyring anchor (docs/security.md#aud-3). The database may
    /// be ahead of the anchor (a crash between commit and anchoring) only if it extends the anchored
    /// entry exactly.
    public func verify() throws(OStackError) -> Verification {
        // The anchor first, then the chain in one transaction: an append by another process in
        // between can only make the chain longer than the anchor, which verifies.
        AnchorWrites.settle()  // this process's own anchor writes first
        let anchorText = try secrets.read(anchorKey).map { item in
            item.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        }
        return try store.transaction { () throws(OStackError) -> Verification in try verifyChain(anchorText: anchorText)
        }
    }

    func verifyChain(anchorText: String?) throws(OStackError) -> Verification {
        var previous = try store.value("audit.genesis").flatMap(Hex.decode)
        var expected = 1
        let count = try store.integer("SELECT count(*) FROM audit")
        var macs: [Int: [UInt8]] = [:]
        for row in try store.rows("SELECT seq, time, event, outcome, details, mac FROM audit ORDER BY seq") {
            let seq = Int(row.int("seq") ?? 0)
            guard seq == expected else {
                return Verification(intact: false, events: count, firstBadSeq: expected, problem: "gap")
            }
            let details = row.text("details").flatMap { JSONValue.parse(Array($0.utf8))?.objectValue }?
                .compactMapValues(\.stringValue)
            guard let previousMAC = previous, let details, case .blob(let stored) = row["mac"],
                Self.encode(details) == row.text("details")
            else { return Verification(intact: false, events: count, firstBadSeq: seq, problem: "mac") }
            let entry = AuditEntry(
                seq: seq, time: row.text("time") ?? "", event: row.text("event") ?? "",
                outcome: row.text("outcome") ?? "",
                details: details)
            guard BLAKE2b.constantTimeEqual(try mac(entry, previous: previousMAC), stored) else {
                return Verification(intact: false, events: count, firstBadSeq: seq, problem: "mac")
            }
            macs[seq] = stored
            previous = stored
            expected += 1
        }
        guard let anchorText else {
            return count == 0
                ? Verification(intact: true, events: 0)
                : Verification(intact: false, events: count, firstBadSeq: 1, problem: "anchor-missing")
        }
        let parts = anchorText.split(separator: ":")
        guard parts.count == 2, let seq = Int(parts[0]), let mac = Hex.decode(String(parts[1])) else {
            return Verification(intact: false, events: count, firstBadSeq: 1, problem: "anchor-missing")
        }
        if seq > count {
            return Verification(intact: false, events: count, firstBadSeq: count + 1, problem: "truncated")
        }
        guard let stored = macs[seq], BLAKE2b.constantTimeEqual(stored, mac) else {
            return Verification(intact: false, events: count, firstBadSeq: seq, problem: "rolled-back")
        }
        return Verification(intact: true, events: count)
    }
}
