# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Binlog row image values straight to their JSON text in change records, byte for byte as
the Python path writes the values its readers give (:mod:`changestream.decoding.row_values`
and :mod:`changestream.encoding.temporal_text`): DECIMAL, DOUBLE, DATETIME2, TIMESTAMP2,
DATE and TIME2; the same values in the forms the Spark sink's Arrow columns hold (what
:mod:`changestream.sinks.spark.types` makes of the Python values); and CRC-32 for the
events' checksums. Each reader gives the bytes it read, or -1 when the value is cut short
or not valid (the Python reader then says what is wrong).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free
from libc.string cimport memcpy

cdef extern from "Python.h":
    char* PyOS_double_to_string(double val, char format_code, int precision, int flags,
                                int* type) except NULL
    int Py_DTSF_ADD_DOT_0

# A DOUBLE's shortest text (Python's repr) for 1e-4 <= |x| < 1e15, where repr writes no
# exponent, in integers: Python's own dtoa (big-number arithmetic) took 350-660 ns a value
# and ~8% of a run's CPU on a table with a DOUBLE column. x = f * 2^e; its correctly rounded
# 15-, 16- and 17-digit forms D are tried in turn, each checked exactly (D * 10^-k lies
# strictly inside the interval of numbers that round to x), and the first that rounds back
# is repr's: the shortest, and of that length the closest. A 15-digit form that rounds back
# is the only one of 15 digits or fewer (their spacing exceeds a double's) and repr's own,
# trailing zeros cut; of two as close, the even one. Anything not certain (a form on the
# interval's edge; 16 digits for a power of two, whose interval is lopsided) is left to
# Python: 0.
cdef extern from *:
    """
    #include <math.h>
    #include <stdint.h>
    #include <string.h>

    typedef unsigned __int128 cs_u128;

    static const uint64_t CS_POW5[21] = {
        1ULL, 5ULL, 25ULL, 125ULL, 625ULL, 3125ULL, 15625ULL, 78125ULL, 390625ULL,
        1953125ULL, 9765625ULL, 48828125ULL, 244140625ULL, 1220703125ULL,
        6103515625ULL, 30517578125ULL, 152587890625ULL, 762939453125ULL,
        3814697265625ULL, 19073486328125ULL, 95367431640625ULL};

    /* D = f * 2^e * 10^k rounded to an integer (n: f * 5^k, the scaled x is n / 2^s);
       on a tie D is the lower neighbour and *tie is set. 0: out of this code's range. */
    static int cs_rounded(uint64_t f, int e, int k, cs_u128 *n, int *s, uint64_t *d,
                          int *tie) {
        cs_u128 q, r, half;
        *s = -(e + k);
        if (k < 0 || k > 20 || *s < 1 || *s > 100) return 0;
        *n = (cs_u128)f * CS_POW5[k];
        q = *n >> *s;
        r = *n - (q << *s);
        half = (cs_u128)1 << (*s - 1);
        *tie = r == half;
        if (r > half) q += 1;
        *d = (uint64_t)q;
        return 1;
    }

    /* Whether d * 10^-k rounds to x (n, s as above): 1 yes, 0 no, -1 on the edge. */
    static int cs_inside(cs_u128 n, int s, int k, int lopsided, uint64_t d) {
        /* In units of 2^-(s+2): x is 4n; half an ulp above it is 2 * 5^k, below it the
           same, or half that at a power of two. */
        cs_u128 d4 = (cs_u128)d << (s + 2), n4 = n << 2;
        cs_u128 above = (cs_u128)CS_POW5[k] << 1;
        cs_u128 below = lopsided ? (cs_u128)CS_POW5[k] : above;
        if (d4 == n4 + above || d4 == n4 - below) return -1;
        return d4 < n4 + above && d4 > n4 - below;
    }

    /* 1: the closest D of this length rounds back to x (set in *d); 0: none of this
       length does; -1: not certain (an edge). Of two as close that both round back, repr
       takes the one whose last digit is even (dtoa's half-even rounding of a digit). */
    static int cs_rounds_back(uint64_t f, int e, int k, int lopsided, uint64_t *d) {
        cs_u128 n;
        int s, tie, lower, upper;
        if (!cs_rounded(f, e, k, &n, &s, d, &tie)) return -1;
        if (!tie) return cs_inside(n, s, k, lopsided, *d);
        lower = cs_inside(n, s, k, lopsided, *d);
        upper = cs_inside(n, s, k, lopsided, *d + 1);
        if (lower < 0 || upper < 0) return -1;
        if (upper && (!lower || (*d & 1))) *d += 1;
        return lower || upper;
    }

    static int cs_write(int negative, uint64_t d, int exp10, char *out) {
        char digits[24];
        int n = 0, len = 0, i;
        while (d % 10 == 0) d /= 10;
        while (d) { digits[n++] = (char)('0' + d % 10); d /= 10; }
        if (negative) out[len++] = '-';
        if (exp10 < 0) {
            out[len++] = '0'; out[len++] = '.';
            for (i = 0; i < -exp10 - 1; i++) out[len++] = '0';
            while (n) out[len++] = digits[--n];
            return len;
        }
        for (i = 0; i <= exp10; i++) out[len++] = n ? digits[--n] : '0';
        out[len++] = '.';
        if (!n) out[len++] = '0';
        while (n) out[len++] = digits[--n];
        return len;
    }

    /* repr(x) into out (32 bytes) and its length, or 0: left to Python. */
    static int cs_short_double(double x, char *out) {
        /* 10^15, 10^16, 10^17: where forms of 15, 16 and 17 digits end */
        static const uint64_t TENS[3] = {1000000000000000ULL, 10000000000000000ULL,
                                        100000000000000000ULL};
        double ax = fabs(x);
        uint64_t bits, mant, f, d;
        int e, exp10, tries, digits, k, back;
        cs_u128 n;
        int s, tie;
        if (!(ax >= 1e-4 && ax < 1e15)) return 0;
        memcpy(&bits, &ax, 8);
        mant = bits & 0xFFFFFFFFFFFFFULL;
        f = mant | (1ULL << 52);
        e = (int)(bits >> 52) - 1075;
        exp10 = (int)floor(log10(ax));
        for (tries = 0; ; tries++) {  /* the decimal exponent of the 17-digit form */
            if (tries > 3 || exp10 < -4 || exp10 > 14) return 0;
            if (!cs_rounded(f, e, 16 - exp10, &n, &s, &d, &tie)) return 0;
            if (d >= TENS[2]) exp10++;
            else if (d < TENS[1]) exp10--;
            else break;
        }
        for (digits = 15; digits <= 17; digits++) {
            if (digits == 16 && mant == 0) return 0;
            k = digits - 1 - exp10;
            back = cs_rounds_back(f, e, k, mant == 0, &d);
            if (back < 0) return 0;
            if (back) {
                if (d >= TENS[digits - 15])  /* rounded up to one more digit */
                    return cs_write(x < 0, d / 10, exp10 + 1, out);
                return cs_write(x < 0, d, exp10, out);
            }
        }
        return 0;
    }
    """
    int cs_short_double(double x, char* out) noexcept

cdef int DIG2BYTES[10]
DIG2BYTES[:] = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4]
cdef uint32_t POW10[10]
POW10[:] = [1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000]
cdef uint64_t MICRO_SCALE[4]
MICRO_SCALE[:] = [0, 10000, 100, 1]  # microseconds per unit of a 0..3-byte fraction

cdef uint32_t CRC_TABLE[8][256]


cdef void _crc_tables() noexcept:
    cdef uint32_t c, i, k
    for i in range(256):
        c = i
        for k in range(8):
            c = (c >> 1) ^ (0xEDB88320 if c & 1 else 0)
        CRC_TABLE[0][i] = c
    for i in range(256):
        c = CRC_TABLE[0][i]
        for k in range(1, 8):
            c = CRC_TABLE[0][c & 0xFF] ^ (c >> 8)
            CRC_TABLE[k][i] = c


_crc_tables()


cdef uint32_t crc32(const uint8_t* p, Py_ssize_t n) noexcept:
    """CRC-32 (zlib's), eight bytes a step."""
    cdef uint32_t c = 0xFFFFFFFF
    cdef uint32_t lo, hi
    while n >= 8:
        lo = u32(p) ^ c
        hi = u32(p + 4)
        c = (CRC_TABLE[7][lo & 0xFF] ^ CRC_TABLE[6][(lo >> 8) & 0xFF]
             ^ CRC_TABLE[5][(lo >> 16) & 0xFF] ^ CRC_TABLE[4][lo >> 24]
             ^ CRC_TABLE[3][hi & 0xFF] ^ CRC_TABLE[2][(hi >> 8) & 0xFF]
             ^ CRC_TABLE[1][(hi >> 16) & 0xFF] ^ CRC_TABLE[0][hi >> 24])
        p += 8
        n -= 8
    while n > 0:
        c = CRC_TABLE[0][(c ^ p[0]) & 0xFF] ^ (c >> 8)
        p += 1
        n -= 1
    return c ^ 0xFFFFFFFF


def crc32_of(bytes data):
    """CRC-32 of ``data`` as this module computes it (for the tests)."""
    return crc32(<const uint8_t*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))


def short_double_text(double value):
    """The integer path's text of ``value`` (see ``cs_short_double``), or ``None`` where it
    leaves the value to Python (for the tests)."""
    cdef char short[32]
    cdef int size = cs_short_double(value, short)
    return short[:size].decode("ascii") if size else None


def json_of(str kind, bytes data, int a=0, int b=0):
    """The JSON text the writer ``kind`` (decimal: ``a`` precision, ``b`` scale; datetime2,
    timestamp2, time2: ``a`` fractional digits; date; double) gives for ``data``, or
    ``None`` where it leaves the value to Python (for the tests)."""
    cdef Buffer out = Buffer()
    cdef const uint8_t* p = <const uint8_t*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(data), used
    cdef double d
    if kind == "double":
        if n != 8:
            raise ValueError("a DOUBLE is 8 bytes")
        memcpy(&d, p, 8)
        used = 8 if put_double(out, d) == 0 else -1
    elif kind == "decimal":
        used = put_decimal(out, p, n, a, b)
    elif kind == "datetime2":
        used = put_datetime2(out, p, n, a)
    elif kind == "timestamp2":
        used = put_timestamp2(out, p, n, a)
    elif kind == "time2":
        used = put_time2(out, p, n, a)
    elif kind == "date":
        used = put_date(out, p, n)
    else:
        raise ValueError(f"no writer {kind!r}")
    return None if used < 0 else out.take(0, out.size)


cdef int _group_digits(char* into, uint32_t g, int width) noexcept:
    """``g`` in decimal zero-padded to ``width`` digits (0: as many as it has)."""
    cdef char tmp[12]
    cdef int n = 0, i
    while True:
        tmp[n] = <char>(48 + g % 10)
        g //= 10
        n += 1
        if g == 0 and n >= width:
            break
    for i in range(n):
        into[i] = tmp[n - 1 - i]
    return n


cdef Py_ssize_t _decimal_digits(const uint8_t* p, Py_ssize_t avail, int precision,
                                int scale, char* digits, int* count,
                                bint* negative) except -2:
    """The decimal digits of a binary DECIMAL(precision, scale) (``count`` of them, the
    integer part's leading zeros included, the last ``scale`` the fraction's) and its sign;
    how many bytes it takes."""
    cdef int intg = precision - scale
    cdef int intg0 = intg // 9, intg0x = intg % 9, frac0 = scale // 9, frac0x = scale % 9
    cdef int size = DIG2BYTES[intg0x] + 4 * (intg0 + frac0) + DIG2BYTES[frac0x]
    cdef uint8_t raw[40]
    cdef int nd = 0, i, k, at = 0
    cdef uint32_t g
    if size > avail or size > 40 or size == 0:
        return -1
    memcpy(raw, p, size)
    negative[0] = not (raw[0] & 0x80)
    raw[0] ^= 0x80
    if negative[0]:
        for i in range(size):
            raw[i] = ~raw[i]
    if intg0x:  # the integer part's leftover digits: the most significant group, unchecked
        at = DIG2BYTES[intg0x]
        nd += _group_digits(digits, <uint32_t>big_endian(raw, at), 0)
    for k in range(intg0 + frac0):
        g = <uint32_t>big_endian(raw + at, 4)
        if g >= 1000000000:
            return -1
        at += 4
        nd += _group_digits(digits + nd, g, 9)
    if frac0x:
        g = <uint32_t>big_endian(raw + at, DIG2BYTES[frac0x])
        if g >= POW10[frac0x]:
            return -1
        nd += _group_digits(digits + nd, g, frac0x)
    count[0] = nd
    return size


cdef Py_ssize_t put_decimal(Buffer out, const uint8_t* p, Py_ssize_t avail, int precision,
                            int scale) except -2:
    """A binary DECIMAL(precision, scale) as its quoted text (the column's scale, no
    exponent; zero without a sign), as ``decimal_binary.decode_decimal`` reads it."""
    cdef char digits[128]
    cdef int nd = 0, i, first
    cdef bint negative
    cdef Py_ssize_t size = _decimal_digits(p, avail, precision, scale, digits, &nd, &negative)
    if size < 0:
        return -1
    first = 0
    while first < nd and digits[first] == 48:
        first += 1
    out.put(b'"', 1)
    if first < nd and negative:
        out.put(b"-", 1)
    if first == nd:  # zero
        out.put(b"0", 1)
        if scale:
            out.put(b".", 1)
            for i in range(scale):
                out.put(b"0", 1)
    elif scale and nd - first <= scale:
        out.put(b"0.", 2)
        for i in range(scale - (nd - first)):
            out.put(b"0", 1)
        out.put(digits + first, nd - first)
    elif scale:
        out.put(digits + first, nd - first - scale)
        out.put(b".", 1)
        out.put(digits + nd - scale, scale)
    else:
        out.put(digits + first, nd - first)
    out.put(b'"', 1)
    return size


cdef Py_ssize_t read_decimal128(const uint8_t* p, Py_ssize_t avail, int precision, int scale,
                                int128_t* unscaled) except -2:
    """A binary DECIMAL(precision <= 38, scale) as Arrow's decimal128 holds it: the value
    times 10^scale, as a 128-bit integer (-1: bytes that hold more digits than
    ``precision``, which no server writes and Arrow does not take)."""
    cdef char digits[128]
    cdef int nd = 0, i, first
    cdef bint negative
    cdef int128_t v = 0
    cdef Py_ssize_t size
    if precision > 38:
        return -1
    size = _decimal_digits(p, avail, precision, scale, digits, &nd, &negative)
    if size < 0:
        return -1
    first = 0
    while first < nd and digits[first] == 48:
        first += 1
    if nd - first > precision:  # more digits than the type holds: Arrow refuses them too
        return -1
    for i in range(first, nd):
        v = v * 10 + (digits[i] - 48)
    unscaled[0] = -v if negative else v
    return size


cdef int put_double(Buffer out, double value) except -1:
    """``value`` as orjson writes it: 0, or 1 (nothing written) when Python's shortest form
    has an exponent or is not finite, where orjson's form differs and orjson must write it."""
    cdef char short[32]
    cdef int size = cs_short_double(value, short)
    if size:
        out.put(short, size)
        return 0
    cdef char* text = PyOS_double_to_string(value, b'r', 0, Py_DTSF_ADD_DOT_0, NULL)
    cdef Py_ssize_t n = 0
    cdef bint plain = True
    while text[n]:
        if text[n] == b'e' or text[n] == b'n' or text[n] == b'i':
            plain = False
        n += 1
    if plain:
        out.put(text, n)
    PyMem_Free(text)
    return 0 if plain else 1


cdef void _civil(int64_t days, int64_t* year, int* month, int* day) noexcept:
    """The proleptic Gregorian date ``days`` (>= 0) after 1970-01-01 (H. Hinnant's
    algorithm)."""
    cdef int64_t z = days + 719468
    cdef int64_t era = z // 146097
    cdef int64_t doe = z - era * 146097
    cdef int64_t yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    cdef int64_t doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    cdef int64_t mp = (5 * doy + 2) // 153
    day[0] = <int>(doy - (153 * mp + 2) // 5 + 1)
    month[0] = <int>(mp + 3 if mp < 10 else mp - 9)
    year[0] = yoe + era * 400 + (1 if month[0] <= 2 else 0)


cdef int _put_clock(Buffer out, int64_t year, int64_t month, int64_t day, int64_t hour,
                    int64_t minute, int64_t second) except -1:
    """``YYYY-MM-DDTHH:MM:SS``, each part zero-padded as Python's ``%02d`` pads it."""
    out.put_digits(<uint64_t>year, 4)
    out.put(b"-", 1)
    out.put_digits(<uint64_t>month, 2)
    out.put(b"-", 1)
    out.put_digits(<uint64_t>day, 2)
    out.put(b"T", 1)
    out.put_digits(<uint64_t>hour, 2)
    out.put(b":", 1)
    out.put_digits(<uint64_t>minute, 2)
    out.put(b":", 1)
    out.put_digits(<uint64_t>second, 2)
    return 0


cdef int _put_fraction(Buffer out, uint64_t micro, int fsp) except -1:
    """``.`` and the first ``fsp`` digits of ``micro`` written with at least six (none
    for 0 digits)."""
    cdef Py_ssize_t start
    if fsp:
        out.put(b".", 1)
        start = out.size
        out.put_digits(micro, 6)
        out.size = start + fsp
    return 0


cdef Py_ssize_t put_datetime2(Buffer out, const uint8_t* p, Py_ssize_t avail,
                              int fsp) except -2:
    """A DATETIME2 as ``"YYYY-MM-DDTHH:MM:SS[.f]"`` (``fsp`` digits), valid or not: the
    datetime's ISO text and an invalid date's server text are alike."""
    cdef int64_t packed, ymd
    cdef uint64_t micro
    cdef Py_ssize_t size = _datetime2(p, avail, fsp, &packed, &micro)
    if size < 0:
        return -1
    ymd = packed >> 17
    out.put(b'"', 1)
    _put_clock(out, (ymd >> 5) // 13, (ymd >> 5) % 13, ymd & 31, (packed >> 12) & 31,
               (packed >> 6) & 63, packed & 63)
    _put_fraction(out, micro, fsp)
    out.put(b'"', 1)
    return size


cdef inline Py_ssize_t _datetime2(const uint8_t* p, Py_ssize_t avail, int fsp,
                                  int64_t* packed, uint64_t* micro) noexcept:
    """A DATETIME2's packed date and time (its sign bit taken off) and microseconds; the
    bytes it takes, or -1 (cut short, or before year 0: no server writes it)."""
    cdef int nfrac = (fsp + 1) // 2
    if 5 + nfrac > avail:
        return -1
    packed[0] = <int64_t>big_endian(p, 5) - 0x8000000000
    if packed[0] < 0:
        return -1
    micro[0] = big_endian(p + 5, nfrac) * MICRO_SCALE[nfrac]
    return 5 + nfrac


cdef Py_ssize_t put_timestamp2(Buffer out, const uint8_t* p, Py_ssize_t avail,
                               int fsp) except -2:
    """A TIMESTAMP2 as ``"YYYY-MM-DDTHH:MM:SS[.f]+00:00"`` (zero: ``0000-00-00...``)."""
    cdef int nfrac = (fsp + 1) // 2
    cdef int64_t seconds, year
    cdef uint64_t micro
    cdef int month, day
    if 4 + nfrac > avail:
        return -1
    seconds = <int64_t>big_endian(p, 4)
    micro = big_endian(p + 4, nfrac) * MICRO_SCALE[nfrac]
    out.put(b'"', 1)
    if seconds == 0 and micro == 0:
        out.put(b"0000-00-00T00:00:00", 19)
        if fsp:
            out.put(b".000000", fsp + 1)
    else:
        seconds += <int64_t>(micro // 1000000)
        micro = micro % 1000000
        _civil(seconds // 86400, &year, &month, &day)
        seconds = seconds % 86400
        _put_clock(out, year, month, day, seconds // 3600, seconds // 60 % 60, seconds % 60)
        _put_fraction(out, micro, fsp)
    out.put(b'+00:00"', 7)
    return 4 + nfrac


cdef int put_epoch_micros(Buffer out, uint64_t micros) except -1:
    """``micros`` after the epoch as ``"YYYY-MM-DDTHH:MM:SS.ffffff+00:00"`` (a UTC
    datetime's ``isoformat(timespec="microseconds")``, quoted)."""
    cdef int64_t seconds = <int64_t>(micros // 1000000), year
    cdef int month, day
    out.put(b'"', 1)
    _civil(seconds // 86400, &year, &month, &day)
    seconds = seconds % 86400
    _put_clock(out, year, month, day, seconds // 3600, seconds // 60 % 60, seconds % 60)
    _put_fraction(out, micros % 1000000, 6)
    out.put(b'+00:00"', 7)
    return 0


def epoch_micros_json(uint64_t micros):
    """What :func:`put_epoch_micros` writes (for the tests)."""
    cdef Buffer out = Buffer()
    put_epoch_micros(out, micros)
    return out.take(0, out.size)


cdef Py_ssize_t put_date(Buffer out, const uint8_t* p, Py_ssize_t avail) except -2:
    """A DATE as ``"YYYY-MM-DD"``, valid or not."""
    cdef uint64_t v
    if 3 > avail:
        return -1
    v = p[0] | (<uint64_t>p[1] << 8) | (<uint64_t>p[2] << 16)
    out.put(b'"', 1)
    out.put_digits(v >> 9, 4)
    out.put(b"-", 1)
    out.put_digits((v >> 5) & 15, 2)
    out.put(b"-", 1)
    out.put_digits(v & 31, 2)
    out.put(b'"', 1)
    return 3


cdef Py_ssize_t put_time2(Buffer out, const uint8_t* p, Py_ssize_t avail, int fsp) except -2:
    """A TIME2 as ``"[-]HH:MM:SS[.f]"`` (hours past 24 as they are; minus zero unsigned)."""
    return _time2(out, p, avail, fsp, fsp, True)


cdef Py_ssize_t put_time2_text(Buffer out, const uint8_t* p, Py_ssize_t avail,
                               int fsp) except -2:
    """A TIME2 as ``[-]HH:MM:SS.ffffff`` (always six fractional digits, unquoted: the
    Spark sink's text of a TIME, ``temporal_text.time_text``)."""
    return _time2(out, p, avail, fsp, 6, False)


cdef Py_ssize_t _time2(Buffer out, const uint8_t* p, Py_ssize_t avail, int fsp, int digits,
                       bint quoted) except -2:
    cdef int nfrac = (fsp + 1) // 2
    cdef int size = 3 + nfrac
    cdef int64_t packed, whole, micros, seconds
    cdef bint negative
    if size > avail:
        return -1
    packed = <int64_t>big_endian(p, size) - (<int64_t>1 << (size * 8 - 1))
    negative = packed < 0
    if negative:
        packed = -packed
    whole = packed >> (8 * nfrac)
    micros = ((((whole >> 12) & 0x3FF) * 60 + ((whole >> 6) & 63)) * 60 + (whole & 63)) \
        * 1000000 + (packed & ((<int64_t>1 << (8 * nfrac)) - 1)) * MICRO_SCALE[nfrac]
    if quoted:
        out.put(b'"', 1)
    if negative and micros:
        out.put(b"-", 1)
    seconds = micros // 1000000
    out.put_digits(<uint64_t>(seconds // 3600), 2)
    out.put(b":", 1)
    out.put_digits(<uint64_t>(seconds // 60 % 60), 2)
    out.put(b":", 1)
    out.put_digits(<uint64_t>(seconds % 60), 2)
    _put_fraction(out, <uint64_t>(micros % 1000000), digits)
    if quoted:
        out.put(b'"', 1)
    return size


cdef int64_t _days(int64_t year, int64_t month, int64_t day) noexcept:
    """Days from 1970-01-01 to the proleptic Gregorian date (H. Hinnant's algorithm)."""
    cdef int64_t y = year - (1 if month <= 2 else 0)
    cdef int64_t era = (y if y >= 0 else y - 399) // 400
    cdef int64_t yoe = y - era * 400
    cdef int64_t doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    cdef int64_t doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


cdef bint _valid_date(int64_t year, int64_t month, int64_t day) noexcept:
    """Whether Python's ``datetime.date`` takes the date (else the reader gives its text,
    which the Spark sink lands as NULL)."""
    cdef int last
    if year < 1 or year > 9999 or month < 1 or month > 12 or day < 1:
        return False
    if month == 2:
        last = 29 if (year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)) else 28
    elif month == 4 or month == 6 or month == 9 or month == 11:
        last = 30
    else:
        last = 31
    return day <= last


cdef Py_ssize_t read_datetime2_micros(const uint8_t* p, Py_ssize_t avail, int fsp,
                                      int64_t* micros, bint* valid) except -2:
    """A DATETIME2 as microseconds after 1970-01-01 00:00 (no time zone); ``valid`` false
    for the dates Python's datetime does not take (zero, invalid)."""
    cdef int64_t packed, ymd, year, month, day, hour, minute, second
    cdef uint64_t micro
    cdef Py_ssize_t size = _datetime2(p, avail, fsp, &packed, &micro)
    if size < 0:
        return -1
    ymd = packed >> 17
    year, month, day = (ymd >> 5) // 13, (ymd >> 5) % 13, ymd & 31
    hour, minute, second = (packed >> 12) & 31, (packed >> 6) & 63, packed & 63
    valid[0] = _valid_date(year, month, day) and hour < 24 and minute < 60 \
        and second < 60 and micro < 1000000
    if valid[0]:
        micros[0] = ((_days(year, month, day) * 24 + hour) * 60 + minute) * 60000000 \
            + second * 1000000 + <int64_t>micro
    return size


cdef Py_ssize_t read_timestamp2_micros(const uint8_t* p, Py_ssize_t avail, int fsp,
                                       int64_t* micros, bint* valid) except -2:
    """A TIMESTAMP2 as microseconds after the epoch (UTC); ``valid`` false for zero."""
    cdef int nfrac = (fsp + 1) // 2
    cdef int64_t seconds
    cdef uint64_t micro
    if 4 + nfrac > avail:
        return -1
    seconds = <int64_t>big_endian(p, 4)
    micro = big_endian(p + 4, nfrac) * MICRO_SCALE[nfrac]
    valid[0] = seconds != 0 or micro != 0
    micros[0] = seconds * 1000000 + <int64_t>micro
    return 4 + nfrac


cdef Py_ssize_t read_date_days(const uint8_t* p, Py_ssize_t avail, int32_t* days,
                               bint* valid) except -2:
    """A DATE as days after 1970-01-01; ``valid`` false for zero or invalid dates."""
    cdef uint64_t v
    if 3 > avail:
        return -1
    v = p[0] | (<uint64_t>p[1] << 8) | (<uint64_t>p[2] << 16)
    valid[0] = _valid_date(v >> 9, (v >> 5) & 15, v & 31)
    if valid[0]:
        days[0] = <int32_t>_days(v >> 9, (v >> 5) & 15, v & 31)
    return 3


def arrow_value_of(str kind, bytes data, int a=0, int b=0):
    """What the Arrow-form reader ``kind`` (decimal128: ``a`` precision, ``b`` scale;
    datetime2, timestamp2, time2: ``a`` fractional digits; date) gives for ``data``: the
    integer (``None`` for NULL) or the text; ``-1`` where it leaves the value to Python
    (for the tests)."""
    cdef const uint8_t* p = <const uint8_t*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(data), used
    cdef int128_t unscaled = 0
    cdef int64_t micros = 0
    cdef int32_t days = 0
    cdef bint valid = True
    cdef Buffer out = Buffer()
    if kind == "decimal128":
        used = read_decimal128(p, n, a, b, &unscaled)
        value = (<object>(<int64_t>(unscaled >> 64)) << 64) + \
            <object>(<uint64_t>(unscaled & 0xFFFFFFFFFFFFFFFF))
    elif kind == "datetime2":
        used = read_datetime2_micros(p, n, a, &micros, &valid)
        value = micros
    elif kind == "timestamp2":
        used = read_timestamp2_micros(p, n, a, &micros, &valid)
        value = micros
    elif kind == "date":
        used = read_date_days(p, n, &days, &valid)
        value = days
    elif kind == "time2":
        used = put_time2_text(out, p, n, a)
        value = out.take(0, out.size).decode()
    else:
        raise ValueError(f"no reader {kind!r}")
    if used < 0:
        return -1
    return value if valid else None
