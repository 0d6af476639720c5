// An npm package of tools/package.json (installed by tools/setup.sh) for a node test, or
// the test skipped: exit 77, which CTest reports as skipped, with the reason on stderr.
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const tools = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../tools');

export function toolPackage(name, test) {
  try {
    return createRequire(path.join(tools, 'package.json'))(name);
  } catch {
    console.error(`${test}: the ${name} package is not installed (tools/setup.sh installs it)`);
    process.exit(77);
  }
}
