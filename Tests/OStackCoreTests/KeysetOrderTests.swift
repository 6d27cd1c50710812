import Testing

@testable import OStackCore

/// `Puller.isEarlier`: a keyset page must not go back in time. Judged only between UTC ISO 8601
/// timestamps, fractions compared as decimals; any other spelling is never called earlier.
struct KeysetOrderTests {
    @Test(arguments: [
        ("2026-11-25T03:12:47.821Z", "2026-11-25T03:12:47.822Z", true),
        ("2026-11-25T03:12:47.822Z", "2026-11-25T03:12:47.822Z", false),
        ("2026-11-25T03:12:48Z", "2026-11-25T03:12:47.999Z", false),
        ("2026-11-25T03:12:47.9Z", "2026-11-25T03:12:47.85Z", false),
        ("2026-11-25T03:12:47.85Z", "2026-11-25T03:12:47.9Z", true),
        ("2026-11-25T03:12:47Z", "2026-11-25T03:12:47.001Z", true),
        ("2025-12-31T23:59:59.999Z", "2026-01-01T00:00:00.000Z", true),
        // Not judged: offsets, other spellings, garbage.
        ("2026-11-25T03:12:47.000+01:00", "2026-11-25T03:12:48.000Z", false),
        ("2026-11-25 03:12:47", "2026-11-25T03:12:48Z", false),
        ("12345", "2026-11-25T03:12:48Z", false),
        ("2026-11-25T03:12:4x.000Z", "2026-11-25T03:12:48Z", false),
        ("2026-11-25T03:12:47.Z", "2026-11-25T03:12:48Z", false),
    ])
    func earlierOnlyWhenBothAreTimestamps(_ version: String, _ current: String, _ earlier: Bool) {
        #expect(Puller.isEarlier(version, than: current) == earlier)
    }
}
