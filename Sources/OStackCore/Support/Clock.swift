import FoundationEssentials

/// The current time, injectable for tests of expiry and refresh windows.
public struct Clock: Sendable {
    public let now: @Sendable () -> Date

    public init(now: @escaping @Sendable () -> Date) {
        self.now = now
    }

    public static let system = Clock { Date() }
}
