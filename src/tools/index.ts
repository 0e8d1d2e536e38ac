/**
 * Imports every built-in tool so that each registers itself. Add one line per new built-in file.
 */
import "./builtin/generate-image.js";
import "./builtin/get-current-datetime.js";
import "./builtin/list-directory.js";
import "./builtin/shell.js";
import "./builtin/read-file.js";
import "./builtin/write-file.js";
import "./builtin/file-ops.js";
import "./builtin/glob.js";
import "./builtin/grep.js";
import "./builtin/apply-patch.js";
import "./builtin/web-fetch.js";
import "./builtin/web-search.js";
import "./builtin/agent-spawn.js";
import "./builtin/agent-send.js";
import "./builtin/agent-wait.js";
import "./builtin/agent-close.js";
import "./builtin/sql-schema.js";
import "./builtin/sql-query.js";
