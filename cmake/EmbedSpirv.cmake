# Turns one .spv file into a C++ source file holding its words (little-endian uint32).
file(READ ${SPV} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR words "${n} / 8")
string(REGEX REPLACE "([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])"
       "0x\\4\\3\\2\\1u," body "${hex}")
file(WRITE ${OUT} "extern const unsigned ${SYMBOL}[] = {${body}};\nextern const unsigned long ${SYMBOL}_words = ${words};\n")
