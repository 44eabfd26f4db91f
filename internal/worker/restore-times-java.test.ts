/**
 * Maven across a real pause (see restore-times.test.ts for the harness).
 * maven-compiler-plugin recompiles a module when a source is newer than its class in
 * target/classes (target/ is in the workspace, so in the snapshot): restored with mtime 0
 * everywhere, a same-size edit made before the pause would look as old as the build and the
 * old class would run. The plugins come from Maven Central through the run's setup step
 * (`mvn -B dependency:go-offline`, with the maven preset). Needs the Java sandbox image
 * (agentd-sandbox-java:latest; `make images`) and the registry; a missing image fails,
 * never skips.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  edit,
  file,
  type PauseRestore,
  requireImage,
  sh,
  startPauseRestore,
  stdoutOf,
} from "../testing/pause-restore.ts";

const JAVA_IMAGE = "agentd-sandbox-java:latest";
/** The plugins pinned, as in examples/java-slugs/pom.xml; no dependencies. */
const POM = `<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>com.example</groupId>
  <artifactId>m</artifactId>
  <version>0.1.0</version>
  <properties>
    <maven.compiler.source>17</maven.compiler.source>
    <maven.compiler.target>17</maven.compiler.target>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <build>
    <plugins>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-compiler-plugin</artifactId>
        <version>3.13.0</version>
      </plugin>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-resources-plugin</artifactId>
        <version>3.3.1</version>
      </plugin>
    </plugins>
  </build>
</project>
`;
/** Maven's own output (and the colour resets it prints even with -q) goes to stderr. */
const RUN = "mvn -B -q compile 1>&2 && java -cp target/classes m.Main";

let harness: PauseRestore;
before(async () => {
  await requireImage(JAVA_IMAGE);
  harness = await startPauseRestore();
});
after(async () => {
  await harness?.close();
});

describe("a Maven project restored after a pause (Java image)", () => {
  it("mvn compile recompiles a class whose source changed same-size before the pause", async () => {
    const results = await harness.run({
      image: JAVA_IMAGE,
      network: "maven",
      files: [
        file("pom.xml", POM),
        file(
          "src/main/java/m/Main.java",
          'package m;\n\npublic class Main {\n  public static void main(String[] a) {\n    System.out.println("value=old");\n  }\n}\n',
        ),
      ],
      before: [
        sh("build", RUN),
        edit("edit", "src/main/java/m/Main.java", "value=old", "value=new"),
      ],
      after: [sh("run", RUN)],
    });
    assert.equal(stdoutOf(results, "build").trim(), "value=old");
    assert.ok(results.get("edit")?.ok);
    assert.equal(stdoutOf(results, "run").trim(), "value=new", "maven recompiled the edited class");
  });
});
