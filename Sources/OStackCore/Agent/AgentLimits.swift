/// How long `ostack agent` keeps an unlocked key: it forgets it after `idle` seconds without use or
/// `lifetime` seconds after it was handed over, whichever comes first (docs/storage.md#the-agent). The one definition
/// of the defaults: the settings `agent.idle-timeout` and `agent.max-lifetime` show them, the lock
/// use cases and the file keyring use them.
public struct AgentLimits: Sendable, Equatable {
    public static let idleSetting = "agent.idle-timeout"
    public static let lifetimeSetting = "agent.max-lifetime"
    /// The defaults as `ostack config` shows them.
    static let defaultIdleText = "15m"
    static let defaultLifetimeText = "12h"
    /// 15 minutes idle, 12 hours at most.
    public static let defaults = AgentLimits(
        idle: Setting.duration(defaultIdleText)!, lifetime: Setting.duration(defaultLifetimeText)!)

    /// Seconds without use.
    public var idle: Double
    /// Seconds after the key was handed over.
    public var lifetime: Double

    public init(idle: Double, lifetime: Double) {
        self.idle = idle
        self.lifetime = lifetime
    }

    /// The configured limits (a setting left unset has its default; one whose value is not valid is
    /// `invalid-setting`, never quietly the default: that could be longer than the user wrote).
    public init(configuration: ConfigurationStore) throws(OStackError) {
        try self.init(configuration: try configuration.load())
    }

    /// Each limit as configured, or its default where the value is not valid: for shortening the
    /// limits of keys already unlocked (`config set`), which only ever makes them shorter.
    public static func eachValidOrDefault(_ configuration: Configuration) -> AgentLimits {
        AgentLimits(
            idle: (try? configuration.validValue(of: idleSetting)).flatMap(Setting.duration) ?? defaults.idle,
            lifetime: (try? configuration.validValue(of: lifetimeSetting)).flatMap(Setting.duration)
                ?? defaults.lifetime)
    }

    public init(configuration: Configuration) throws(OStackError) {
        idle = Setting.duration(try configuration.validValue(of: Self.idleSetting)) ?? Self.defaults.idle
        lifetime = Setting.duration(try configuration.validValue(of: Self.lifetimeSetting)) ?? Self.defaults.lifetime
    }
}
