// The C library's math functions that Swift's standard library lacks, for the modules that import no libc.
import Glibc

/// x raised to the power y (libm's pow).
public func power(_ x: Double, _ y: Double) -> Double { Glibc.pow(x, y) }
