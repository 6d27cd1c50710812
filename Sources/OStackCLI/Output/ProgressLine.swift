import Glibc
import OStackCore
import PlatformKit

/// One line of progress on stderr, redrawn in place (docs/output.md, "Progress"):
///
///     pulling task  ████████░░░░░░░░░░░░  41%  41 000/100 000  12 300/s  ETA 5 s
///
/// Only for a person watching: stderr is a terminal and `--json` is not given (`make` returns nil
/// otherwise). Redrawn at most ten times a second, cut to the terminal's width, and cleared before
/// anything else is printed.
final class ProgressLine: @unchecked Sendable {
    // @unchecked Sendable: called from the one thread that runs the sync, never concurrently.
    private let terminal: Terminal
    private let width: Int
    private var started: (label: String, at: Double)?
    private var lastDraw = 0.0
    private var drawn = false

    private init(terminal: Terminal, width: Int) {
        self.terminal = terminal
        self.width = width
    }

    static func make(context: CommandContext) -> ProgressLine? {
        guard !context.global.json, ProcessEnvironment.isTerminal(STDERR_FILENO) else { return nil }
        let columns =
            context.environment["COLUMNS"].flatMap(Int.init)
            ?? ProcessEnvironment.terminalSize(STDERR_FILENO)?.columns ?? 80
        return ProgressLine(terminal: context.terminal, width: max(20, min(columns, 400)))
    }

    func update(_ progress: SyncProgress) {
        switch progress {
        case .pulling(let object, let done, let total):
            update(
                label: "pulling \(ErrorPresenter.sanitize(object, maxLength: 40))", done: done, total: total,
                unit: "records")
        case .pushing(let done, let total):
            update(label: "pushing", done: done, total: total, unit: "changes")
        }
    }

    func update(label: String, done: Int, total: Int?, unit: String) {
        let now = Self.clock()
        if started?.label != label { started = (label, now) }
        let finished = total.map { done >= $0 } ?? false
        guard finished || now - lastDraw >= 0.1 else { return }
        lastDraw = now
        let elapsed = now - (started?.at ?? now)
        terminal.err(
            "\r\u{1B}[2K"
                + Self.render(label: label, done: done, total: total, unit: unit, elapsed: elapsed, width: width))
        drawn = true
    }

    /// Removes the line (before a result or an error is printed).
    func clear() {
        if drawn { terminal.err("\r\u{1B}[2K") }
        drawn = false
        started = nil
    }

    /// The line's text: label, bar and percentage when the total is known, count, rate once it
    /// means something, ETA; cut to `width`.
    static func render(label: String, done: Int, total: Int?, unit: String, elapsed: Double, width: Int) -> String {
        let rate = elapsed >= 0.5 ? Double(done) / elapsed : nil
        var parts = [label]
        if let total, total > 0 {
            let fraction = min(1, Double(done) / Double(total))
            let cells = 20
            let full = Int(fraction * Double(cells))
            parts.append(String(repeating: "█", count: full) + String(repeating: "░", count: cells - full))
            parts.append("\(Int(fraction * 100))%")
            parts.append("\(grouped(done))/\(grouped(total))")
        } else {
            parts.append("\(grouped(done)) \(unit)")
        }
        if let rate, rate > 0 {
            parts.append("\(grouped(Int(rate)))/s")
            if let total, total > done { parts.append("ETA " + duration(Double(total - done) / rate)) }
        }
        return DisplayWidth.truncate(parts.joined(separator: "  "), to: width - 1)
    }

    /// `12 300`: thousands separated by a space (no locale needed).
    static func grouped(_ value: Int) -> String {
        let digits = Array(String(abs(value)))
        var text = ""
        for (index, digit) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { text.append(" ") }
            text.append(digit)
        }
        return (value < 0 ? "-" : "") + text
    }

    static func duration(_ seconds: Double) -> String {
        guard seconds.isFinite, seconds >= 0, seconds < 1e7 else { return "—" }  // a server's total can be anything
        let seconds = Int(seconds.rounded(.up))
        if seconds < 60 { return "\(seconds) s" }
        if seconds < 3600 { return "\(seconds / 60) min \(seconds % 60) s" }
        return "\(seconds / 3600) h \((seconds % 3600) / 60) min"
    }

    static func clock() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
}

/// Ctrl-C during a sync: the progress line is cleared and a message says what is kept, then the
/// process exits 130 at once. Everything a sync writes is committed in transactions that survive
/// being cut off, so what was pulled or pushed stays, and `sync status` calls the sync partial.
/// Installed for the sync itself only (`remove` restores the default before any prompt); the
/// message is written once into a buffer that is never freed, so the handler reads stable memory.
enum InterruptMessage {
    nonisolated(unsafe) private static var message: UnsafeMutableBufferPointer<UInt8>?
    /// What `remove` puts back.
    nonisolated(unsafe) private static var previous: SignalDisposition.Previous = .none

    /// Shows `text` on Ctrl-C. Nothing is installed when SIGINT is ignored (a background job whose
    /// shell ignores it stays uninterruptible, as it was started).
    static func install(_ text: String) {
        // A new text gets a new buffer; the old one is never freed (a handler may be reading it).
        let bytes = Array(("\r\u{1B}[2K" + text + "\n").utf8)
        let buffer = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: bytes.count)
        _ = buffer.initialize(from: bytes)
        message = buffer
        previous = SignalDisposition.replace(SIGINT) { _ in
            if let buffer = InterruptMessage.message { _ = write(STDERR_FILENO, buffer.baseAddress, buffer.count) }
            _exit(130)
        }
    }

    /// Puts back the handler that was there before `install`.
    static func remove() {
        SignalDisposition.restore(SIGINT, previous)
        previous = .none
    }
}
