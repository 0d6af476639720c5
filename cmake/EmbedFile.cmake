# Turns one file into a C++ source file holding its bytes (the web page of gpt-vk serve).
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
file(WRITE ${OUT} "extern const unsigned char ${SYMBOL}[] = {${body}};\nextern const unsigned long ${SYMBOL}_size = ${bytes};\n")
