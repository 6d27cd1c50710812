import Glibc

/// Signal handlers ostack sets for a while (Ctrl-C during a sync or import, a no-echo prompt, a
/// pager) and puts back after. A signal that was ignored when the handler was to be set (a
/// background job of a script) stays ignored, and the one that was there before is restored, not
/// the default.
enum SignalDisposition {
    /// The handler in place before `replace`; `.none` when nothing was replaced.
    typealias Previous = __sighandler_t??

    /// Whether `signalNumber` is ignored now (read without changing it).
    static func isIgnored(_ signalNumber: Int32) -> Bool {
        var current = sigaction()
        guard sigaction(signalNumber, nil, &current) == 0, let handler = current.__sigaction_handler.sa_handler
        else { return false }
        return unsafeBitCast(handler, to: Int.self) == unsafeBitCast(SIG_IGN, to: Int.self)
    }

    /// Sets `handler` unless the signal is ignored; what to give `restore`.
    static func replace(_ signalNumber: Int32, with handler: __sighandler_t) -> Previous {
        guard !isIgnored(signalNumber) else { return .none }
        let before = signal(signalNumber, handler)
        if let before, unsafeBitCast(before, to: Int.self) == unsafeBitCast(SIG_ERR, to: Int.self) { return .none }
        return .some(before)
    }

    /// Puts back what `replace` found (nothing when it replaced nothing).
    static func restore(_ signalNumber: Int32, _ previous: Previous) {
        guard let before = previous else { return }
        signal(signalNumber, before ?? SIG_DFL)
    }
}
