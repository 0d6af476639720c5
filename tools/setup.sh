#!/usr/bin/env bash
# Installs what gpt-vk needs from Debian 12 and builds it into build/. Idempotent: packages
# already present are not fetched again and the build is incremental. Run as root or with sudo.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkg-config
  libvulkan-dev glslang-tools spirv-tools mesa-vulkan-drivers vulkan-validationlayers vulkan-tools
  libtomlplusplus-dev libboost-test-dev nlohmann-json3-dev libcli11-dev libpcre2-dev libicu-dev zlib1g-dev libcpp-httplib-dev
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# node and npm run tools/ (tokenizer reference) and the openai client test (tests/openai_client.mjs);
# Debian's nodejs/npm unless a node is already installed.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing nodejs npm"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
# The npm packages tools/package.json pins (exactly those of package-lock.json), when missing.
if [ ! -d tools/node_modules/openai ] || [ ! -d tools/node_modules/gpt-3-encoder ] || [ ! -d tools/node_modules/playwright-core ] ||
  [ ! -d tools/node_modules/@huggingface/tokenizers ]; then
  echo "setup: installing the npm packages of tools/package.json"
  (cd tools && npm ci --no-audit --no-fund >/dev/null)
fi

BUILD_TYPE=${BUILD_TYPE:-Release}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" >/dev/null
ninja -C build
