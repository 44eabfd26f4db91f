/**
 * gRPC server reflection (grpc.reflection.v1 and the legacy v1alpha) for the connect-es
 * server, so buf curl, grpcurl and Postman can list our services and fetch their schemas
 * without a copy of the .proto files. Answers come from the generated file descriptors.
 */
import {
  create,
  createFileRegistry,
  type DescFile,
  type MessageInitShape,
  toBinary,
} from "@bufbuild/protobuf";
import { nestedTypes } from "@bufbuild/protobuf/reflect";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, type ConnectRouter, type ServiceImpl } from "@connectrpc/connect";
import {
  file_grpc_reflection_v1_reflection,
  ServerReflection,
  type ServerReflectionRequest,
  type ServerReflectionResponseSchema,
} from "../gen/grpc/reflection/v1/reflection_pb.js";

/** Options of the reflection service. */
export interface ReflectionOptions {
  /** Files to describe; their imports (transitively, well-known types included) come along. */
  files: readonly DescFile[];
  /**
   * Fully-qualified names answered to list_services, e.g. "agentd.v1.RunService". Each must
   * be declared in `files` (the reflection service itself always is): buf curl --list-methods
   * fails outright when a listed service cannot be resolved.
   */
  services: readonly string[];
}

type Response = MessageInitShape<typeof ServerReflectionResponseSchema>;

/**
 * Registers grpc.reflection.v1.ServerReflection and grpc.reflection.v1alpha.ServerReflection
 * (same messages, older name; clients fall back to it) on `router`.
 * Throws if a name in `opts.services` is not a service of `opts.files`.
 */
export function registerReflection(router: ConnectRouter, opts: ReflectionOptions): ConnectRouter {
  const impl = createReflectionService(opts);
  return router.service(ServerReflection, impl).service(v1alphaService(), impl);
}

/** Builds the ServerReflectionInfo implementation over `opts`; throws like registerReflection. */
export function createReflectionService(
  opts: ReflectionOptions,
): ServiceImpl<typeof ServerReflection> {
  const index = buildIndex([...opts.files, file_grpc_reflection_v1_reflection]);
  const missing = opts.services.filter((s) => !index.services.has(s));
  if (missing.length > 0) {
    throw new Error(`reflection: services not declared in the given files: ${missing.join(", ")}`);
  }
  const encoded = new Map<DescFile, Uint8Array>();
  const encode = (f: DescFile): Uint8Array => {
    let bytes = encoded.get(f);
    if (!bytes) {
      bytes = toBinary(FileDescriptorProtoSchema, f.proto);
      encoded.set(f, bytes);
    }
    return bytes;
  };

  const answer = (req: ServerReflectionRequest): Response["messageResponse"] => {
    const r = req.messageRequest;
    const files = (f: DescFile | undefined, what: string): Response["messageResponse"] =>
      f
        ? {
            case: "fileDescriptorResponse",
            value: { fileDescriptorProto: withDeps(f).map(encode) },
          }
        : error(Code.NotFound, `${what} not found`);
    switch (r.case) {
      case "listServices":
        return {
          case: "listServicesResponse",
          value: { service: opts.services.map((name) => ({ name })) },
        };
      case "fileByFilename":
        return files(index.files.get(r.value), `file ${r.value}`);
      case "fileContainingSymbol":
        return files(index.symbols.get(stripDot(r.value)), `symbol ${r.value}`);
      case "fileContainingExtension": {
        const key = `${stripDot(r.value.containingType)}#${r.value.extensionNumber}`;
        return files(index.extensions.get(key), `extension ${key}`);
      }
      case "allExtensionNumbersOfType": {
        const base = stripDot(r.value);
        const numbers = index.extensionNumbers.get(base);
        if (!numbers) return error(Code.NotFound, `type ${r.value} not found`);
        return {
          case: "allExtensionNumbersResponse",
          value: { baseTypeName: base, extensionNumber: numbers },
        };
      }
      default:
        return error(Code.InvalidArgument, "empty reflection request");
    }
  };

  return {
    async *serverReflectionInfo(requests) {
      for await (const req of requests) {
        yield { validHost: req.host, originalRequest: req, messageResponse: answer(req) };
      }
    },
  };
}

/** Lookup tables over the files and everything they import. */
interface Index {
  /** By proto file name, e.g. "agentd/v1/events.proto". */
  files: Map<string, DescFile>;
  /** Messages, enums, enum values, fields, oneofs, services, methods, extensions. */
  symbols: Map<string, DescFile>;
  /** Fully-qualified service names. */
  services: Set<string>;
  /** "extendee#number" → file declaring the extension. */
  extensions: Map<string, DescFile>;
  /** Message name → extension numbers declared for it in the files. */
  extensionNumbers: Map<string, number[]>;
}

function buildIndex(roots: readonly DescFile[]): Index {
  const index: Index = {
    files: new Map(),
    symbols: new Map(),
    services: new Set(),
    extensions: new Map(),
    extensionNumbers: new Map(),
  };
  const all = roots.flatMap(withDeps);
  for (const file of all) {
    index.files.set(file.proto.name, file);
    const scope = file.proto.package ? `${file.proto.package}.` : "";
    for (const t of nestedTypes(file)) {
      index.symbols.set(t.typeName, file);
      if (t.kind === "message") {
        index.extensionNumbers.set(t.typeName, []);
        for (const f of t.fields) index.symbols.set(`${t.typeName}.${f.name}`, file);
        for (const o of t.oneofs) index.symbols.set(`${t.typeName}.${o.name}`, file);
      } else if (t.kind === "enum") {
        // Enum values live in the enum's enclosing scope (C++ scoping rules).
        const parent = t.parent ? `${t.parent.typeName}.` : scope;
        for (const v of t.values) index.symbols.set(`${parent}${v.name}`, file);
      } else if (t.kind === "service") {
        index.services.add(t.typeName);
        for (const m of t.methods) index.symbols.set(`${t.typeName}.${m.name}`, file);
      }
    }
  }
  // Extensions second, so that every extendee has its (possibly empty) number list.
  for (const file of all) {
    for (const t of nestedTypes(file)) {
      if (t.kind !== "extension") continue;
      index.extensions.set(`${t.extendee.typeName}#${t.number}`, file);
      index.extensionNumbers.get(t.extendee.typeName)?.push(t.number);
    }
  }
  return index;
}

/** `file` first, then its transitive imports, each once. */
function withDeps(file: DescFile): DescFile[] {
  const out: DescFile[] = [];
  const seen = new Set<DescFile>();
  const visit = (f: DescFile): void => {
    if (seen.has(f)) return;
    seen.add(f);
    out.push(f);
    for (const d of f.dependencies) visit(d);
  };
  visit(file);
  return out;
}

function stripDot(name: string): string {
  return name.startsWith(".") ? name.slice(1) : name;
}

function error(code: Code, message: string): Response["messageResponse"] {
  return { case: "errorResponse", value: { errorCode: code, errorMessage: message } };
}

/**
 * grpc.reflection.v1alpha.ServerReflection, built at runtime. Its wire messages are
 * byte-for-byte those of v1, so its method reuses the v1 message descriptors: one
 * implementation serves both names.
 */
function v1alphaService(): typeof ServerReflection {
  const v1 = file_grpc_reflection_v1_reflection;
  const proto = create(FileDescriptorProtoSchema, {
    name: "grpc/reflection/v1alpha/reflection.proto",
    package: "grpc.reflection.v1alpha",
    dependency: [v1.proto.name],
    syntax: "proto3",
    service: [
      {
        name: "ServerReflection",
        method: [
          {
            name: "ServerReflectionInfo",
            inputType: ".grpc.reflection.v1.ServerReflectionRequest",
            outputType: ".grpc.reflection.v1.ServerReflectionResponse",
            clientStreaming: true,
            serverStreaming: true,
          },
        ],
      },
    ],
  });
  const registry = createFileRegistry(proto, (name) => (name === v1.proto.name ? v1 : undefined));
  const service = registry.getService("grpc.reflection.v1alpha.ServerReflection");
  if (!service) throw new Error("grpc.reflection.v1alpha.ServerReflection: descriptor not built");
  // Same method name, kind and message descriptors as v1: the typed shape holds.
  return service as unknown as typeof ServerReflection;
}
