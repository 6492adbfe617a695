"""Load the c-shared fixture with ctypes and run sandboxed commands from
Python, with a busy Python thread competing, as a real host would.

usage: smoke.py LIBRARY SPEC_JSON...   (prints one JSON reply per line)
"""
import ctypes
import sys
import threading

lib = ctypes.CDLL(sys.argv[1])
lib.RunJSON.argtypes = [ctypes.c_char_p]
lib.RunJSON.restype = ctypes.c_void_p
lib.FreeString.argtypes = [ctypes.c_void_p]

stop = False


def busy():
    n = 0
    while not stop:
        n += 1


t = threading.Thread(target=busy)
t.start()
try:
    for spec in sys.argv[2:]:
        p = lib.RunJSON(spec.encode())
        print(ctypes.string_at(p).decode(), flush=True)
        lib.FreeString(p)
finally:
    stop = True
    t.join()
