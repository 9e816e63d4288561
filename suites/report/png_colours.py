"""Counts the pixels of given colours in a PNG screenshot (8-bit RGB or RGBA), for the tests that
look at a page in headless Chromium: python3 png_colours.py SHOT.png RRGGBB... prints one count
per colour on a line. Only the standard library: zlib and the PNG filters written out."""
import struct
import sys
import zlib


def rows_of(path):
    png = open(path, 'rb').read()
    assert png[:8] == b'\x89PNG\r\n\x1a\n', 'not a PNG'
    pos, idat = 8, b''
    while pos < len(png):
        n, kind = struct.unpack('>I4s', png[pos:pos + 8])
        data = png[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b'IHDR':
            w, h, depth, ctype = struct.unpack('>IIBB', data[:10])
        if kind == b'IDAT':
            idat += data
    assert depth == 8 and ctype in (2, 6), (depth, ctype)
    bpp = 4 if ctype == 6 else 3
    raw, stride, prev, rows, i = zlib.decompress(idat), w * bpp, bytearray(w * bpp), [], 0
    for _ in range(h):
        f = raw[i]
        line = bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return w, h, bpp, rows


if __name__ == '__main__':
    w, h, bpp, rows = rows_of(sys.argv[1])
    for hexrgb in sys.argv[2:]:
        rgb = tuple(int(hexrgb[k:k + 2], 16) for k in (0, 2, 4))
        print(sum(1 for r in rows for x in range(0, w * bpp, bpp) if tuple(r[x:x + 3]) == rgb))
