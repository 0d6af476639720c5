#!/usr/bin/env bash
# Packs what one call of the workplace's device tool needs to test and benchmark this build
# on a lent GPU, into two git-ignored folders the call carries (the device machine is a
# bare image that reaches no package registry and has no Debian build tools, so nothing is
# built there):
#   .gl/   the Vulkan loader and the GL libraries NVIDIA's Vulkan driver loads, as Debian
#          packages, fetched as /work/.library/device/README.md says;
#   .gpu/  bundle.tar.xz: build/gpt-vk, every test binary and CTest's files, and the
#          libraries the image lacks (Boost.Test, the validation layer); source_dir: where
#          this checkout is, which the test binaries have compiled in; llama-bench.tar.xz:
#          llama.cpp's llama-bench and llama-batched-bench with its prebuilt Vulkan libraries
#          (bench/llama_cpp/build_llama_bench.sh; npm installs node-llama-cpp first if
#          needed), the same-device baseline; left out, with a warning, if it cannot be built.
# Then it prints the call to make; bench/gpu/gpu_check.sh is what runs there.
# Usage: bench/gpu/gpu_prepare.sh   (after tools/setup.sh, which it reruns: a no-op if built)
set -euo pipefail
cd "$(dirname "$0")/../.."

tools/setup.sh >/dev/null

if ! ls .gl/libvulkan1_*.deb >/dev/null 2>&1; then
  echo "gpu_prepare: fetching the Vulkan loader packages into .gl/" >&2
  mkdir -p .gl /tmp/amd64/partial
  o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64)
  apt-get "${o[@]}" update -qq
  (cd .gl && apt-get "${o[@]}" download -qq libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/build/tests" "$stage/build/gpu-lib"
cp build/gpt-vk "$stage/build/"
cp build/CTestTestfile.cmake "$stage/build/"
cp build/tests/CTestTestfile.cmake "$stage/build/tests/"
find build/tests -maxdepth 1 -name 'test_*' -type f -perm -u+x -exec cp {} "$stage/build/tests/" \;
strip "$stage/build/gpt-vk" "$stage"/build/tests/test_*
# Libraries of the test binaries that are not glibc's, the compiler's or the Vulkan
# loader's (those come from the image or from .gl/).
ldd build/tests/test_models build/gpt-vk | awk '/=> \//{print $3}' | sort -u |
  grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|libvulkan)\.so' |
  xargs -I{} cp -L {} "$stage/build/gpu-lib/"
layer=/usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so
cp "$layer" "$stage/build/gpu-lib/"
# The manifest names the library by file name; a path relative to the manifest finds it
# in gpu-lib/ without LD_LIBRARY_PATH.
sed 's#"library_path": *"[^"]*"#"library_path": "./libVkLayer_khronos_validation.so"#' \
  /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json >"$stage/build/gpu-lib/VkLayer_khronos_validation.json"

# The device tool carries at most 64 MiB, the ~30 MiB working tree included: xz's strongest
# preset takes these two archives from 35 to 31 MB (3 min here instead of 1); with the
# default preset a call had 0.4 MiB to spare.
export XZ_OPT=-9e
mkdir -p .gpu
tar -C "$stage" -cJf .gpu/bundle.tar.xz build

llama=bench/llama_cpp/llama-bench
if [ ! -x "$llama/llama-bench" ] || [ ! -x "$llama/llama-batched-bench" ]; then
  if [ ! -d bench/llama_cpp/node_modules/node-llama-cpp ] && command -v npm >/dev/null; then
    echo "gpu_prepare: npm install in bench/llama_cpp (node-llama-cpp's prebuilt llama.cpp)" >&2
    (cd bench/llama_cpp && npm install --omit=optional --ignore-scripts --no-audit --no-fund >/dev/null) || true
  fi
  bench/llama_cpp/build_llama_bench.sh >/dev/null || true
fi
if [ -x "$llama/llama-bench" ]; then
  tar -C bench/llama_cpp -cJf .gpu/llama-bench.tar.xz llama-bench
else
  rm -f .gpu/llama-bench.tar.xz
  echo "gpu_prepare: WARNING: no llama-bench; gpu_check.sh will leave llama.cpp out" >&2
fi
pwd >.gpu/source_dir
du -sh .gl .gpu | sed 's/^/gpu_prepare: /' >&2
# What one call carries: the working tree (tracked files and untracked ones git does not
# ignore) and the two folders, against the tool's 64 MiB.
carried=$( { git ls-files -z --cached --others --exclude-standard; find .gl .gpu -type f -print0; } |
  du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
echo "gpu_prepare: a call carries $((carried / 1048576)) MiB of the device tool's 64" >&2
[ "$carried" -le $((64 * 1048576)) ] ||
  echo "gpu_prepare: WARNING: over 64 MiB: the call will be refused; without .gpu/llama-bench.tar.xz it is 10 MB less (gpu_check.sh then leaves llama.cpp out)" >&2
cat <<'EOF'
Ready. One call of the device tool (run), when `status` shows a machine is lent:
  carry: [".gl", ".gpu"]
  command: bash bench/gpu/gpu_check.sh
(gpu_check.sh's header lists the variants and settings it takes; keep timeout_s under the
session's device time so that there is time to run it again.)
EOF
