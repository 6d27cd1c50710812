import Dispatch
import Glibc
import PlatformKit
import Synchronization

/// A spinner on stderr while a command waits on the server (docs/output.md, "Waiting"):
///
///     ⠙ Waiting for crm.example.com — the change is saved (Ctrl-C stops waiting)
///
/// Only for a person watching (stderr is a terminal, no `--json`), only once the wait has lasted
/// 0.3 s (a quick answer shows nothing), and cleared before anything else is printed.
final class Spinner: Sendable {
    private let label: String
    private let running = Mutex(true)
    private let finished = DispatchSemaphore(value: 0)

    private init(label: String) { self.label = label }

    /// Runs `body` with a spinner labelled `label` when a person is watching.
    static func around<T, E: Error>(
        _ context: CommandContext, _ label: String, _ body: () throws(E) -> T
    ) throws(E) -> T {
        guard !context.global.json, ProcessEnvironment.isTerminal(STDERR_FILENO) else { return try body() }
        let spinner = Spinner(label: ErrorPresenter.sanitize(label, maxLength: 200))
        spinner.start()
        defer { spinner.stop() }
        return try body()
    }

    private func start() {
        DispatchQueue.global().async { [self] in
            let frames = Array("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")
            var ticks = 0
            var drawn = false
            while running.withLock({ $0 }) {
                if ticks >= 3 {
                    Terminal.write(STDERR_FILENO, "\r\u{1B}[2K\(frames[ticks % frames.count]) \(label)")
                    drawn = true
                }
                ticks += 1
                usleep(100_000)
            }
            if drawn { Terminal.write(STDERR_FILENO, "\r\u{1B}[2K") }
            finished.signal()
        }
    }

    private func stop() {
        running.withLock { $0 = false }
        finished.wait()
    }
}
